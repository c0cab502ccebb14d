package kube

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/devtools/testenv"
)

func TestReadFile(t *testing.T) {
	r, f := localRuntime(t)
	ctx, a := context.Background(), testAgent()
	must(t, os.WriteFile(filepath.Join(f.home, ".openclaw", "openclaw.json"), []byte(`{"gateway":{}}`), 0o600))
	for _, tc := range []struct {
		path string
		want string
		err  error
	}{
		{".openclaw/openclaw.json", `{"gateway":{}}`, nil},
		{".openclaw/workspace/file.txt", "hello\n", nil},
		{".openclaw/workspace/linkin/../file.txt", "hello\n", nil},
		{".openclaw/workspace/missing.txt", "", runtime.ErrNotFound},
		{".openclaw/nodir/missing.txt", "", runtime.ErrNotFound},
		{".openclaw/workspace/fileout", "", runtime.ErrInvalidPath},        // symlink to a file outside
		{".openclaw/workspace/linkout/secret", "", runtime.ErrInvalidPath}, // through a symlinked dir
		{".openclaw/workspace/sub", "", runtime.ErrInvalidPath},            // a directory
		{"../outside/secret", "", runtime.ErrInvalidPath},                  // lexically outside
		{filepath.Join(f.outside, "secret"), "", runtime.ErrInvalidPath},   // absolute
	} {
		got, err := r.ReadFile(ctx, a, tc.path)
		if !errors.Is(err, tc.err) || string(got) != tc.want {
			t.Errorf("ReadFile(%q) = %q, %v; want %q, %v", tc.path, got, err, tc.want, tc.err)
		}
	}
	must(t, os.Symlink("file.txt", filepath.Join(f.ws, "filein")))
	if got, err := r.ReadFile(ctx, a, ".openclaw/workspace/filein"); err != nil || string(got) != "hello\n" {
		t.Errorf("symlink inside: %q %v", got, err)
	}
}

func TestWriteFile(t *testing.T) {
	r, f := localRuntime(t)
	ctx, a := context.Background(), testAgent()
	data := []byte("line 1\n$(not run)\n\x00binary\xff")
	must(t, r.WriteFile(ctx, a, ".openclaw/workspace/new/deep/file.bin", data))
	if got, _ := os.ReadFile(filepath.Join(f.ws, "new/deep/file.bin")); !bytes.Equal(got, data) {
		t.Errorf("content %q", got)
	}
	if got, err := r.ReadFile(ctx, a, ".openclaw/workspace/new/deep/file.bin"); err != nil || !bytes.Equal(got, data) {
		t.Errorf("read back %q %v", got, err)
	}
	// Overwrite keeps the mode, leaves no temporary files.
	cfg := filepath.Join(f.home, ".openclaw", "openclaw.json")
	must(t, os.WriteFile(cfg, []byte("old"), 0o600))
	must(t, r.WriteFile(ctx, a, ".openclaw/openclaw.json", []byte("new")))
	st, err := os.Stat(cfg)
	must(t, err)
	if b, _ := os.ReadFile(cfg); string(b) != "new" || st.Mode().Perm() != 0o600 {
		t.Errorf("config %q mode %v", b, st.Mode())
	}
	entries, _ := os.ReadDir(filepath.Dir(cfg))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".openclaw.json.") {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
	// An empty file is a file.
	must(t, r.WriteFile(ctx, a, "empty", nil))
	if st, err := os.Stat(filepath.Join(f.home, "empty")); err != nil || st.Size() != 0 {
		t.Errorf("empty file: %v", err)
	}
	// A symlink at the target is replaced, not followed.
	must(t, r.WriteFile(ctx, a, ".openclaw/workspace/fileout", []byte("mine")))
	if b, _ := os.ReadFile(filepath.Join(f.outside, "secret")); string(b) != "outside secret\n" {
		t.Errorf("wrote through a symlink: outside file is %q", b)
	}
	if fi, _ := os.Lstat(filepath.Join(f.ws, "fileout")); fi.Mode()&os.ModeSymlink != 0 {
		t.Error("symlink not replaced")
	}
	for _, p := range []string{
		".openclaw/workspace/linkout/x",     // parent is a symlink out
		".openclaw/workspace/linkout/new/x", // would mkdir outside
		".openclaw/workspace/sub",           // a directory
		".openclaw/workspace/file.txt/x",    // parent is a file
		"../x", "/tmp/x", "",
	} {
		if err := r.WriteFile(ctx, a, p, []byte("x")); !errors.Is(err, runtime.ErrInvalidPath) {
			t.Errorf("WriteFile(%q): %v", p, err)
		}
	}
	if _, err := os.Stat(filepath.Join(f.outside, "new")); err == nil {
		t.Error("created a directory outside the home")
	}
}

func listTar(t *testing.T, b []byte) map[string]string {
	t.Helper()
	out := map[string]string{}
	tr := tar.NewReader(bytes.NewReader(b))
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		must(t, err)
		if !h.ModTime.Equal(time.Unix(0, 0)) || h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s: mtime %v uid %d gid %d", h.Name, h.ModTime, h.Uid, h.Gid)
		}
		names = append(names, h.Name)
		body, _ := io.ReadAll(tr)
		out[h.Name] = string(body) + h.Linkname
	}
	sorted := append([]string{}, names...)
	sort.Strings(sorted)
	if !reflect.DeepEqual(names, sorted) {
		t.Errorf("names not sorted: %q", names)
	}
	return out
}

func TestArchiveRestore(t *testing.T) {
	r, f := localRuntime(t)
	ctx, a := context.Background(), testAgent()
	must(t, os.Remove(filepath.Join(f.ws, "linkout")))
	must(t, os.Remove(filepath.Join(f.ws, "fileout")))
	must(t, os.WriteFile(filepath.Join(f.ws, "sub", "b.txt"), []byte("bee"), 0o644))
	var one, two bytes.Buffer
	must(t, r.ArchiveWorkspace(ctx, a, &one))
	// Deterministic: new mtimes change nothing.
	future := time.Now().Add(time.Hour)
	must(t, os.Chtimes(filepath.Join(f.ws, "file.txt"), future, future))
	must(t, r.ArchiveWorkspace(ctx, a, &two))
	if !bytes.Equal(one.Bytes(), two.Bytes()) {
		t.Error("archives of the same workspace differ")
	}
	files := listTar(t, one.Bytes())
	if files["./file.txt"] != "hello\n" || files["./sub/b.txt"] != "bee" || files["./linkin"] != "sub" {
		t.Errorf("archive %v", files)
	}

	// Change the workspace, then restore the archive.
	must(t, os.Remove(filepath.Join(f.ws, "file.txt")))
	must(t, os.WriteFile(filepath.Join(f.ws, "extra.txt"), []byte("extra"), 0o644))
	must(t, r.RestoreWorkspace(ctx, a, bytes.NewReader(one.Bytes())))
	// The gateway's pod is rolled so it starts on the restored files.
	if err := r.opts.Client.Get(ctx, client.ObjectKey{Namespace: "ws1", Name: "a1-0"}, &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Errorf("the pod was not restarted after the restore: %v", err)
	}
	var three bytes.Buffer
	must(t, r.ArchiveWorkspace(ctx, a, &three))
	if !bytes.Equal(one.Bytes(), three.Bytes()) {
		t.Errorf("restored workspace differs: %v", listTar(t, three.Bytes()))
	}
	// A broken archive leaves the workspace as it was and no scratch directories.
	if err := r.RestoreWorkspace(ctx, a, strings.NewReader("this is not a tar archive, not at all")); !errors.Is(err, runtime.ErrExec) {
		t.Errorf("broken archive: %v", err)
	}
	var four bytes.Buffer
	must(t, r.ArchiveWorkspace(ctx, a, &four))
	if !bytes.Equal(one.Bytes(), four.Bytes()) {
		t.Error("a failed restore changed the workspace")
	}
	entries, _ := os.ReadDir(filepath.Dir(f.ws))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".workspace.") {
			t.Errorf("scratch left: %s", e.Name())
		}
	}
	// Restoring into an agent without a workspace creates it.
	must(t, os.RemoveAll(f.ws))
	must(t, r.RestoreWorkspace(ctx, a, bytes.NewReader(one.Bytes())))
	if b, err := os.ReadFile(filepath.Join(f.ws, "sub", "b.txt")); err != nil || string(b) != "bee" {
		t.Errorf("restore into a fresh home: %q %v", b, err)
	}
	// No workspace to archive.
	must(t, os.RemoveAll(f.ws))
	if err := r.ArchiveWorkspace(ctx, a, io.Discard); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("archive without workspace: %v", err)
	}
}

// TestWriteFileIntoAFullHome: a write the home's volume has no room for is ErrNoSpace (the
// facade's storage error), not a failed command, and leaves no partial file. The home here is
// a 1 MiB tmpfs, as root.
func TestWriteFileIntoAFullHome(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Skip(t, "mounting a small volume as the home needs root")
	}
	r, f := localRuntime(t)
	full := filepath.Join(f.ws, "full")
	must(t, os.MkdirAll(full, 0o755))
	must(t, unix.Mount("tmpfs", full, "tmpfs", 0, "size=1m"))
	t.Cleanup(func() { _ = unix.Unmount(full, unix.MNT_DETACH) })
	err := r.WriteFile(context.Background(), testAgent(), ".openclaw/workspace/full/big.bin", make([]byte, 2<<20))
	if !errors.Is(err, runtime.ErrNoSpace) {
		t.Fatalf("a 2 MiB write into a 1 MiB home: %v, want ErrNoSpace", err)
	}
	if left, _ := os.ReadDir(full); len(left) != 0 {
		t.Errorf("the refused write left %d entries behind", len(left))
	}
}
