// Package local is a storage.Store on a local directory: the object cid of
// space is the file <root>/<space>/<cid>. Put streams the bytes into a temp
// file in the same directory while computing the CID in one pass, fsyncs it
// and renames it into place, so readers never see a partial object and a
// failed Put leaves no file behind. Memory use is bounded whatever the size.
package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentplane/agentplane/internal/adapters/cid"
	"github.com/agentplane/agentplane/internal/adapters/storage"
)

// tempPrefix starts the names of in-flight uploads; such names are never
// valid CIDs (nor space segments), so List and Stat ignore them.
const tempPrefix = ".put-"

// Store is a storage.Store on a directory. Create it with New.
type Store struct {
	root string
}

var _ storage.Store = (*Store)(nil)

// New returns a Store rooted at dir, creating dir if needed.
func New(dir string) (*Store, error) {
	if dir == "" {
		return nil, errors.New("local storage: empty root directory")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("local storage: %w", err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("local storage: %w", err)
	}
	return &Store{root: abs}, nil
}

// Root returns the absolute root directory.
func (s *Store) Root() string { return s.root }

func (s *Store) dir(space string) (string, error) {
	if err := storage.ValidateSpace(space); err != nil {
		return "", err
	}
	return filepath.Join(s.root, filepath.FromSlash(space)), nil
}

func (s *Store) path(space, c string) (string, string, error) {
	dir, err := s.dir(space)
	if err != nil {
		return "", "", err
	}
	key, err := storage.CanonicalCID(c)
	if err != nil {
		return "", "", err
	}
	return filepath.Join(dir, key), key, nil
}

// Put implements storage.Store.
func (s *Store) Put(ctx context.Context, space string, r io.Reader) (storage.Object, error) {
	dir, err := s.dir(space)
	if err != nil {
		return storage.Object{}, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return storage.Object{}, storage.Unavailable("put", err)
	}
	tmp, err := os.CreateTemp(dir, tempPrefix+"*")
	if err != nil {
		return storage.Object{}, storage.Unavailable("put", err)
	}
	done := false
	defer func() {
		if !done {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()

	src := storage.NewSourceReader(ctx, r)
	c, n, err := cid.Compute(io.TeeReader(src, tmp))
	if err != nil {
		return storage.Object{}, src.SourceError("put", err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		return storage.Object{}, storage.Unavailable("put", err)
	}
	if err := tmp.Sync(); err != nil {
		return storage.Object{}, storage.Unavailable("put", err)
	}
	if err := tmp.Close(); err != nil {
		return storage.Object{}, storage.Unavailable("put", err)
	}
	if err := ctx.Err(); err != nil {
		return storage.Object{}, err
	}
	// Renaming over an existing object is fine: same CID, same bytes.
	if err := os.Rename(tmp.Name(), filepath.Join(dir, c.String())); err != nil {
		return storage.Object{}, storage.Unavailable("put", err)
	}
	done = true
	syncDir(dir)
	return storage.Object{CID: c.String(), Size: n}, nil
}

// syncDir makes a rename in dir durable; failures are ignored (some
// filesystems do not support fsync on directories).
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
}

// Get implements storage.Store.
func (s *Store) Get(ctx context.Context, space, c string) (io.ReadCloser, storage.Object, error) {
	p, key, err := s.path(space, c)
	if err != nil {
		return nil, storage.Object{}, err
	}
	if err := ctx.Err(); err != nil {
		return nil, storage.Object{}, err
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, storage.Object{}, mapErr("get", space, key, err)
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fs.ErrNotExist
	}
	if err != nil {
		_ = f.Close()
		return nil, storage.Object{}, mapErr("get", space, key, err)
	}
	return f, storage.Object{CID: key, Size: fi.Size()}, nil
}

// Stat implements storage.Store.
func (s *Store) Stat(ctx context.Context, space, c string) (storage.Object, error) {
	p, key, err := s.path(space, c)
	if err != nil {
		return storage.Object{}, err
	}
	if err := ctx.Err(); err != nil {
		return storage.Object{}, err
	}
	fi, err := os.Stat(p)
	if err == nil && !fi.Mode().IsRegular() {
		err = fs.ErrNotExist
	}
	if err != nil {
		return storage.Object{}, mapErr("stat", space, key, err)
	}
	return storage.Object{CID: key, Size: fi.Size()}, nil
}

// Delete implements storage.Store.
func (s *Store) Delete(ctx context.Context, space, c string) error {
	p, _, err := s.path(space, c)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	fi, err := os.Lstat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return storage.Unavailable("delete", err)
	case !fi.Mode().IsRegular():
		return nil // a nested space's directory, not an object
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return storage.Unavailable("delete", err)
	}
	syncDir(filepath.Dir(p))
	return nil
}

// List implements storage.Store.
func (s *Store) List(ctx context.Context, space string) ([]storage.Object, error) {
	dir, err := s.dir(space)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(dir) // sorted by name
	if errors.Is(err, fs.ErrNotExist) {
		return []storage.Object{}, nil
	}
	if err != nil {
		return nil, storage.Unavailable("list", err)
	}
	objs := make([]storage.Object, 0, len(entries))
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || strings.HasPrefix(name, tempPrefix) || !cid.Valid(name) {
			continue
		}
		fi, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, storage.Unavailable("list", err)
		}
		objs = append(objs, storage.Object{CID: name, Size: fi.Size()})
	}
	return objs, nil
}

func mapErr(op, space, key string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return storage.NotFound(space, key, nil)
	}
	return storage.Unavailable(op, err)
}

// Backend names the store's kind in metrics.
func (s *Store) Backend() string { return "local" }
