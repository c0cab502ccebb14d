package archive_test

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/adapters/archive"
)

// makeTree builds a tree with files of several modes, nested and empty dirs, symlinks and a
// long name (PAX record).
func makeTree(t *testing.T, root string) {
	t.Helper()
	long := strings.Repeat("n", 120)
	files := map[string]struct {
		data string
		mode fs.FileMode
	}{
		"a.txt":                 {"alpha\n", 0o644},
		"run.sh":                {"#!/bin/sh\necho hi\n", 0o755},
		"secret":                {"s3cr3t", 0o600},
		"a/b/c.bin":             {string([]byte{0, 1, 2, 255, 254}), 0o640},
		"a/z.txt":               {"z", 0o444},
		"sub dir/" + long:       {"long name", 0o644},
		"empty":                 {"", 0o644},
		"big/blob":              {strings.Repeat("0123456789abcdef", 70000), 0o644},
		"skills/hello/SKILL.md": {"---\nname: hello\n---\n", 0o644},
	}
	for name, f := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(f.data), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, f.mode); err != nil {
			t.Fatal(err)
		}
	}
	must(t, os.MkdirAll(filepath.Join(root, "emptydir"), 0o750))
	must(t, os.Symlink("a/b/c.bin", filepath.Join(root, "link-to-file")))
	must(t, os.Symlink("../a.txt", filepath.Join(root, "a/up-link")))
	must(t, os.Symlink("missing-target", filepath.Join(root, "dangling")))
	must(t, os.Symlink("b", filepath.Join(root, "a/dirlink")))
	must(t, os.Chmod(filepath.Join(root, "a/b"), 0o700))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func archiveBytes(t *testing.T, dir string) []byte {
	t.Helper()
	var buf bytes.Buffer
	must(t, archive.Write(dir, &buf))
	return buf.Bytes()
}

func TestWriteIsDeterministic(t *testing.T) {
	d1, d2 := t.TempDir(), t.TempDir()
	makeTree(t, d1)
	makeTree(t, d2)
	// Other times on every entry of the second tree must not matter (set, not waited for).
	then := time.Now().Add(-time.Hour)
	must(t, filepath.WalkDir(d2, func(p string, e os.DirEntry, err error) error {
		if err != nil || e.Type()&os.ModeSymlink != 0 {
			return err // a symlink's own times: Go has no lchtimes
		}
		return os.Chtimes(p, then, then)
	}))

	b1, b2, b3 := archiveBytes(t, d1), archiveBytes(t, d1), archiveBytes(t, d2)
	s1, s2, s3 := sha256.Sum256(b1), sha256.Sum256(b2), sha256.Sum256(b3)
	if s1 != s2 || s1 != s3 {
		t.Fatalf("archives differ: %x %x %x", s1, s2, s3)
	}

	// Header contents: owners 0, no names, epoch mtime, permission bits only, order.
	tr := tar.NewReader(bytes.NewReader(b1))
	var names []string
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		names = append(names, h.Name)
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" || !h.ModTime.Equal(time.Unix(0, 0)) {
			t.Errorf("%s: uid=%d gid=%d uname=%q gname=%q mtime=%v", h.Name, h.Uid, h.Gid, h.Uname, h.Gname, h.ModTime)
		}
		if h.Mode&^0o777 != 0 {
			t.Errorf("%s: mode %o has more than permission bits", h.Name, h.Mode)
		}
	}
	want := []string{"a/", "a/b/", "a/b/c.bin", "a/dirlink", "a/up-link", "a/z.txt", "a.txt", "big/", "big/blob"}
	for i, w := range want {
		if i >= len(names) || names[i] != w {
			t.Fatalf("entry order = %v, want prefix %v", names, want)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	src := t.TempDir()
	makeTree(t, src)
	data := archiveBytes(t, src)

	dst := filepath.Join(t.TempDir(), "restored")
	// An existing target with other content is replaced entirely.
	must(t, os.MkdirAll(filepath.Join(dst, "old"), 0o755))
	must(t, os.WriteFile(filepath.Join(dst, "stale.txt"), []byte("x"), 0o644))
	must(t, archive.Extract(bytes.NewReader(data), dst, archive.Limits{MaxFiles: 100, MaxBytes: 10 << 20}))

	if _, err := os.Lstat(filepath.Join(dst, "stale.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("stale.txt survived the restore: %v", err)
	}
	compareTrees(t, src, dst)
	// Archiving the restored tree gives the same bytes.
	if !bytes.Equal(data, archiveBytes(t, dst)) {
		t.Error("the restored tree archives differently")
	}
	// Nothing is left next to the target.
	entries, _ := os.ReadDir(filepath.Dir(dst))
	if len(entries) != 1 {
		t.Errorf("left behind next to the target: %v", entries)
	}
}

// compareTrees checks types, modes, contents and link targets of every entry.
func compareTrees(t *testing.T, a, b string) {
	t.Helper()
	seen := 0
	err := filepath.WalkDir(a, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(a, p)
		q := filepath.Join(b, rel)
		ia, _ := os.Lstat(p)
		ib, err := os.Lstat(q)
		if err != nil {
			t.Errorf("%s missing: %v", rel, err)
			return nil
		}
		seen++
		if rel != "." && ia.Mode() != ib.Mode() {
			t.Errorf("%s: mode %v, want %v", rel, ib.Mode(), ia.Mode())
		}
		switch {
		case ia.Mode().Type() == fs.ModeSymlink:
			la, _ := os.Readlink(p)
			lb, _ := os.Readlink(q)
			if la != lb {
				t.Errorf("%s: link %q, want %q", rel, lb, la)
			}
		case ia.Mode().IsRegular():
			da, _ := os.ReadFile(p)
			db, _ := os.ReadFile(q)
			if !bytes.Equal(da, db) {
				t.Errorf("%s: content differs", rel)
			}
		}
		return nil
	})
	must(t, err)
	if seen < 10 {
		t.Fatalf("only %d entries compared", seen)
	}
}

// entry is one tar entry a malicious test stream holds.
type entry struct {
	name, link string
	typ        byte
	data       string
}

func tarOf(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: 0o644, Size: int64(len(e.data))}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		if e.typ == tar.TypeDir {
			h.Mode = 0o755
		}
		must(t, tw.WriteHeader(h))
		if h.Size > 0 {
			_, err := tw.Write([]byte(e.data))
			must(t, err)
		}
	}
	must(t, tw.Close())
	return buf.Bytes()
}

func TestExtractRefusesMaliciousStreams(t *testing.T) {
	reg := func(name, data string) entry { return entry{name: name, typ: tar.TypeReg, data: data} }
	sym := func(name, link string) entry { return entry{name: name, link: link, typ: tar.TypeSymlink} }
	cases := []struct {
		name    string
		entries []entry
		limits  archive.Limits
		want    error
	}{
		{"absolute path", []entry{reg("/etc/evil", "x")}, archive.Limits{}, archive.ErrUnsafe},
		{"dotdot escape", []entry{reg("../evil", "x")}, archive.Limits{}, archive.ErrUnsafe},
		{"nested dotdot", []entry{reg("a/../../evil", "x")}, archive.Limits{}, archive.ErrUnsafe},
		{"symlink absolute", []entry{sym("l", "/etc")}, archive.Limits{}, archive.ErrUnsafe},
		{"symlink climbs out", []entry{sym("a/l", "../../outside")}, archive.Limits{}, archive.ErrUnsafe},
		{"symlink through symlink", []entry{sym("sub/u", ".."), sym("l", "sub/u/..")}, archive.Limits{}, archive.ErrUnsafe},
		{"write through symlink out", []entry{sym("l", "."), reg("l/x", "x")}, archive.Limits{}, archive.ErrUnsafe},
		{"write through inner symlink", []entry{{name: "d/", typ: tar.TypeDir}, sym("l", "d"), reg("l/x", "x")}, archive.Limits{}, archive.ErrUnsafe},
		{"dir replaced by symlink", []entry{{name: "d/", typ: tar.TypeDir}, sym("d", ".")}, archive.Limits{}, archive.ErrUnsafe},
		{"char device", []entry{{name: "null", typ: tar.TypeChar}}, archive.Limits{}, archive.ErrUnsafe},
		{"block device", []entry{{name: "sda", typ: tar.TypeBlock}}, archive.Limits{}, archive.ErrUnsafe},
		{"fifo", []entry{{name: "p", typ: tar.TypeFifo}}, archive.Limits{}, archive.ErrUnsafe},
		{"hard link", []entry{{name: "h", link: "/etc/passwd", typ: tar.TypeLink}}, archive.Limits{}, archive.ErrUnsafe},
		{"too many files", []entry{reg("1", "a"), reg("2", "b"), reg("3", "c")}, archive.Limits{MaxFiles: 2}, archive.ErrLimit},
		{"too many bytes", []entry{reg("1", "aaaa"), reg("2", "bbbb")}, archive.Limits{MaxBytes: 6}, archive.ErrLimit},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			dir := filepath.Join(base, "ws")
			must(t, os.MkdirAll(dir, 0o755))
			must(t, os.WriteFile(filepath.Join(dir, "keep.txt"), []byte("keep"), 0o644))
			// The good entries come first: the refusal must also undo them.
			stream := tarOf(t, append([]entry{reg("fresh.txt", "new")}, tc.entries...)...)
			err := archive.Extract(bytes.NewReader(stream), dir, tc.limits)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Extract = %v, want %v", err, tc.want)
			}
			got, err := os.ReadFile(filepath.Join(dir, "keep.txt"))
			if err != nil || string(got) != "keep" {
				t.Fatalf("the old content changed: %q %v", got, err)
			}
			if _, err := os.Lstat(filepath.Join(dir, "fresh.txt")); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("a partial extract is visible: %v", err)
			}
			entries, _ := os.ReadDir(base)
			if len(entries) != 1 {
				t.Fatalf("left behind: %v", entries)
			}
			if _, err := os.Lstat(filepath.Join(base, "evil")); err == nil {
				t.Fatal("an entry escaped")
			}
		})
	}
}

func TestExtractAcceptsSafeLinksAndOddNames(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ws")
	stream := tarOf(t,
		entry{name: "./", typ: tar.TypeDir},
		entry{name: "./a/b/", typ: tar.TypeDir},
		entry{name: "a/b/f", typ: tar.TypeReg, data: "f"},
		entry{name: "a/b/up", link: "../../top", typ: tar.TypeSymlink},
		entry{name: "dot", link: "./a//b/", typ: tar.TypeSymlink},
		entry{name: "implicit/parent/file", typ: tar.TypeReg, data: "p"},
		entry{name: "a/b/f", typ: tar.TypeReg, data: "second wins"},
	)
	must(t, archive.Extract(bytes.NewReader(stream), dir, archive.Limits{MaxFiles: 10}))
	got, err := os.ReadFile(filepath.Join(dir, "dot", "f"))
	if err != nil || string(got) != "second wins" {
		t.Fatalf("dot/f = %q, %v", got, err)
	}
	if l, _ := os.Readlink(filepath.Join(dir, "a/b/up")); l != "../../top" {
		t.Fatalf("link = %q", l)
	}
	if _, err := os.ReadFile(filepath.Join(dir, "implicit/parent/file")); err != nil {
		t.Fatal(err)
	}
}

func TestExtractKeepsDirModeAndCreatesMissingDir(t *testing.T) {
	src := t.TempDir()
	must(t, os.WriteFile(filepath.Join(src, "f"), []byte("x"), 0o644))
	data := archiveBytes(t, src)

	dir := filepath.Join(t.TempDir(), "ws")
	must(t, os.Mkdir(dir, 0o750))
	must(t, os.Chmod(dir, 0o750))
	must(t, archive.Extract(bytes.NewReader(data), dir, archive.Limits{}))
	if info, _ := os.Stat(dir); info.Mode().Perm() != 0o750 {
		t.Errorf("dir mode = %v, want 0750", info.Mode().Perm())
	}

	fresh := filepath.Join(t.TempDir(), "new", "ws")
	must(t, archive.Extract(bytes.NewReader(data), fresh, archive.Limits{}))
	if b, err := os.ReadFile(filepath.Join(fresh, "f")); err != nil || string(b) != "x" {
		t.Fatalf("f = %q, %v", b, err)
	}
}

func TestWriteSkipsSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644))
	must(t, syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644))
	tr := tar.NewReader(bytes.NewReader(archiveBytes(t, dir)))
	var names []string
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		names = append(names, h.Name)
	}
	if strings.Join(names, ",") != "f" {
		t.Fatalf("entries = %v", names)
	}
}

func TestWriteRejectsNonDirectory(t *testing.T) {
	f := filepath.Join(t.TempDir(), "f")
	must(t, os.WriteFile(f, nil, 0o644))
	if err := archive.Write(f, &bytes.Buffer{}); err == nil {
		t.Fatal("Write of a file succeeded")
	}
}

func TestExtractRefusesEmptyStream(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ws")
	must(t, os.MkdirAll(dir, 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "keep"), []byte("k"), 0o644))
	if err := archive.Extract(bytes.NewReader(nil), dir, archive.Limits{}); err == nil {
		t.Fatal("an empty stream emptied the directory")
	}
	if _, err := os.Stat(filepath.Join(dir, "keep")); err != nil {
		t.Fatal(err)
	}
	// An archive of an empty directory is not empty: it empties the target.
	var buf bytes.Buffer
	must(t, archive.Write(t.TempDir(), &buf))
	must(t, archive.Extract(&buf, dir, archive.Limits{}))
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("entries left: %v", entries)
	}
}
