package facade_test

import (
	"context"
	"errors"
	"io"
	"sync/atomic"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/agentplane/agentplane/internal/adapters/storage"
	"github.com/agentplane/agentplane/internal/adapters/storage/local"
)

// mainFiles is the main platform's storage (files and snapshots, for the facade and the
// controllers alike): a local store behind a switch, so that specs can make the backend
// unreachable, make it fail, or point the whole platform at another backend (S3).
var mainFiles *switchStore

// suiteFiles builds mainFiles (called once, in BeforeSuite).
func suiteFiles() storage.Store {
	files, err := local.New(GinkgoT().TempDir())
	Expect(err).NotTo(HaveOccurred())
	mainFiles = &switchStore{}
	mainFiles.inner.Store(&storeRef{files})
	return mainFiles
}

// switchStore forwards to a replaceable store. down makes every call fail like an unreachable
// backend (storage.ErrUnavailable); broken makes Put fail with an error that is not.
type switchStore struct {
	inner  atomic.Pointer[storeRef]
	down   atomic.Bool
	broken atomic.Bool
}

type storeRef struct{ storage.Store }

var errOutage = errors.New("dial tcp: connection refused (test outage)")

// use points the store at st until the returned func is called.
func (s *switchStore) use(st storage.Store) (restore func()) {
	prev := s.inner.Swap(&storeRef{st})
	return func() { s.inner.Store(prev) }
}

// outage makes the backend unreachable until the returned func is called.
func (s *switchStore) outage() (end func()) {
	s.down.Store(true)
	return func() { s.down.Store(false) }
}

func (s *switchStore) get(op string) (storage.Store, error) {
	if s.down.Load() {
		return nil, storage.Unavailable(op, errOutage)
	}
	return s.inner.Load().Store, nil
}

func (s *switchStore) Put(ctx context.Context, space string, r io.Reader) (storage.Object, error) {
	st, err := s.get("put")
	if err != nil {
		return storage.Object{}, err
	}
	if s.broken.Load() {
		_, _ = io.Copy(io.Discard, r)
		return storage.Object{}, errors.New("storage: quota exceeded (test)")
	}
	return st.Put(ctx, space, r)
}

func (s *switchStore) Get(ctx context.Context, space, c string) (io.ReadCloser, storage.Object, error) {
	st, err := s.get("get")
	if err != nil {
		return nil, storage.Object{}, err
	}
	return st.Get(ctx, space, c)
}

func (s *switchStore) Stat(ctx context.Context, space, c string) (storage.Object, error) {
	st, err := s.get("stat")
	if err != nil {
		return storage.Object{}, err
	}
	return st.Stat(ctx, space, c)
}

func (s *switchStore) Delete(ctx context.Context, space, c string) error {
	st, err := s.get("delete")
	if err != nil {
		return err
	}
	return st.Delete(ctx, space, c)
}

func (s *switchStore) List(ctx context.Context, space string) ([]storage.Object, error) {
	st, err := s.get("list")
	if err != nil {
		return nil, err
	}
	return st.List(ctx, space)
}

// treeCommand prints every entry of the workspace (type, mode, path, link target) and the
// SHA-256 of every regular file: equal outputs mean byte-for-byte equal trees.
const treeCommand = `find . -mindepth 1 -printf '%y %m %p %l\n' | LC_ALL=C sort && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum`

// execOK runs a console command in agent id's workspace and returns its stdout.
func execOK(url, tok, id, command string) string {
	r := callURL(url, "POST", "/v0/agents/"+id+"/console/exec", tok, map[string]string{"command": command})
	ExpectWithOffset(1, r.Status).To(Equal(200), r.Raw)
	ExpectWithOffset(1, r.Body["exitCode"]).To(BeEquivalentTo(0), r.Raw)
	return r.Body["stdout"].(string)
}

// snapshotOf is the snapshot object of a sync answer.
func snapshotOf(r reply) map[string]any {
	s, _ := r.Body["snapshot"].(map[string]any)
	return s
}

// historyCIDs lists an agent's snapshot CIDs (newest first) through the facade at url.
func historyCIDs(url, tok, id string) []string {
	r := callURL(url, "GET", "/v0/agents/"+id+"/snapshots", tok, nil)
	ExpectWithOffset(1, r.Status).To(Equal(200), r.Raw)
	out := []string{}
	items, _ := r.Body["snapshots"].([]any)
	for _, it := range items {
		out = append(out, it.(map[string]any)["cid"].(string))
	}
	return out
}
