package local_test

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/agentplane/agentplane/internal/adapters/storage"
	"github.com/agentplane/agentplane/internal/adapters/storage/local"
	"github.com/agentplane/agentplane/internal/adapters/storage/storagetest"
)

func newStore(t *testing.T) *local.Store {
	t.Helper()
	s, err := local.New(filepath.Join(t.TempDir(), "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	s := newStore(t)
	storagetest.Run(t, s)
	assertNoTempFiles(t, s.Root())
}

// TestLayout checks the on-disk layout <root>/<space>/<cid> and that a failed
// Put leaves no file (temp or final) behind.
func TestLayout(t *testing.T) {
	s := newStore(t)
	obj := storagetest.MustPut(t, s, "demo/public", []byte("hello world\n"))
	data, err := os.ReadFile(filepath.Join(s.Root(), "demo", "public", storagetest.HelloCID))
	if err != nil || string(data) != "hello world\n" || obj.CID != storagetest.HelloCID {
		t.Fatalf("object file: %q, %v (object %+v)", data, err, obj)
	}
	fi, _ := os.Stat(filepath.Join(s.Root(), "demo", "public", storagetest.HelloCID))
	if fi.Mode().Perm() != 0o644 {
		t.Fatalf("object mode %v, want 0644", fi.Mode())
	}

	boom := errors.New("boom")
	r := io.MultiReader(bytes.NewReader(storagetest.RandomBytes(500_000, 9)), iotest.ErrReader(boom))
	if _, err := s.Put(t.Context(), "demo/private", r); !errors.Is(err, boom) {
		t.Fatalf("Put: %v", err)
	}
	assertNoTempFiles(t, s.Root())
	if files := regularFiles(t, s.Root()); len(files) != 1 {
		t.Fatalf("files after a failed Put: %v", files)
	}

	// Stray files that are not objects are not listed.
	for _, name := range []string{".put-123", "README", "bafy-not-a-cid"} {
		if err := os.WriteFile(filepath.Join(s.Root(), "demo", "public", name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	storagetest.MustList(t, s, "demo/public", obj)
}

// TestUnavailable: disk errors (here: the root became a file) are
// ErrUnavailable, not ErrNotFound or a bare error.
func TestUnavailable(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	s, err := local.New(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(root, []byte("not a directory"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = s.Put(t.Context(), "demo/public", strings.NewReader("x"))
	storagetest.WantErr(t, "Put with a broken root", err, storage.ErrUnavailable)
	_, err = s.List(t.Context(), "demo/public")
	storagetest.WantErr(t, "List with a broken root", err, storage.ErrUnavailable)
}

func assertNoTempFiles(t *testing.T, root string) {
	t.Helper()
	for _, f := range regularFiles(t, root) {
		if strings.HasPrefix(filepath.Base(f), ".put-") {
			t.Fatalf("temp file left behind: %s", f)
		}
	}
}

func regularFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
