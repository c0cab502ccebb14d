package archive

import (
	"archive/tar"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Limits bound what Extract accepts. A zero field means no limit.
type Limits struct {
	// MaxFiles caps the number of entries (files, directories and symlinks).
	MaxFiles int
	// MaxBytes caps the total size of the regular files.
	MaxBytes int64
}

var (
	// ErrUnsafe: the stream holds an entry that could write outside the target directory or
	// one of a kind Extract does not restore (hard links, devices, FIFOs).
	ErrUnsafe = errors.New("archive: unsafe entry")
	// ErrLimit: the stream holds more entries or bytes than Limits allow.
	ErrLimit = errors.New("archive: limit exceeded")
)

// Extract replaces the content of dir with the tar stream r (ExtractIn, with dir's parent,
// made when missing, opened as a root).
func Extract(r io.Reader, dir string, limits Limits) error {
	dir = filepath.Clean(dir)
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return err
	}
	root, err := os.OpenRoot(parent)
	if err != nil {
		return err
	}
	defer root.Close()
	return ExtractIn(root, filepath.Base(dir), r, limits)
}

// ExtractIn replaces the content of the directory name (one path component) of parent with
// the tar stream r. The stream is extracted into a fresh directory next to it, which is
// swapped in only when every entry was good: on any error the directory is left as it was. It
// keeps its own permissions (a new one gets 0700). Every step goes through parent and the
// fresh directory as roots: a tree that is changed meanwhile (a directory swapped for a
// symlink) never leads a write outside them.
//
// Refused (ErrUnsafe): absolute names and ".." components; symlinks with an absolute target,
// a target that climbs above the tree, or a ".." after a named component ("a/../b": "a" may be
// a symlink itself); entries whose parent path holds a symlink (written through a symlink);
// a directory replaced by a non-directory; hard links, devices, FIFOs and other types.
func ExtractIn(parent *os.Root, name string, r io.Reader, limits Limits) error {
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') {
		return fmt.Errorf("archive: %q is not a directory name", name)
	}
	tmpName, err := mkdirTemp(parent, "."+name+".extract-")
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			_ = RemoveAllIn(parent, tmpName)
		}
	}()
	tmp, err := parent.OpenRoot(tmpName)
	if err != nil {
		return err
	}
	defer tmp.Close()
	if err := extractInto(r, tmp, limits); err != nil {
		return err
	}
	if info, err := parent.Lstat(name); err == nil && info.IsDir() {
		if err := tmp.Chmod(".", info.Mode().Perm()); err != nil {
			return err
		}
	}
	if err := swap(parent, tmpName, name); err != nil {
		return err
	}
	done = true
	return nil
}

// mkdirTemp makes a new private directory in root named prefix and a random suffix, and
// returns its name.
func mkdirTemp(root *os.Root, prefix string) (string, error) {
	for range 100 {
		var b [6]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", err
		}
		name := prefix + hex.EncodeToString(b[:])
		err := root.Mkdir(name, 0o700)
		if err == nil {
			return name, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", err
		}
	}
	return "", fmt.Errorf("archive: no free name for %s*", prefix)
}

// extractInto writes the entries of r below root, which is empty and private.
func extractInto(r io.Reader, root *os.Root, limits Limits) error {
	cr := &countingReader{r: r}
	tr := tar.NewReader(cr)
	type dirMode struct {
		path string
		mode fs.FileMode
	}
	var dirs []dirMode
	var entries int
	var total int64
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			if cr.n == 0 {
				return errors.New("archive: empty stream")
			}
			break
		}
		if err != nil {
			return fmt.Errorf("archive: read: %w", err)
		}
		if hdr.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		name, err := cleanName(hdr.Name)
		if err != nil {
			return err
		}
		if name == "" {
			if hdr.Typeflag == tar.TypeDir {
				continue // the root itself ("./")
			}
			return fmt.Errorf("%w: %q has no name", ErrUnsafe, hdr.Name)
		}
		entries++
		if limits.MaxFiles > 0 && entries > limits.MaxFiles {
			return fmt.Errorf("%w: more than %d entries", ErrLimit, limits.MaxFiles)
		}
		if err := makeParents(root, name); err != nil {
			return err
		}
		perm := fs.FileMode(hdr.Mode).Perm()
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := makeDir(root, name); err != nil {
				return err
			}
			dirs = append(dirs, dirMode{name, perm})
		case tar.TypeReg:
			total += hdr.Size
			if limits.MaxBytes > 0 && total > limits.MaxBytes {
				return fmt.Errorf("%w: more than %d bytes", ErrLimit, limits.MaxBytes)
			}
			if err := writeFile(root, name, tr, perm); err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := checkLink(name, hdr.Linkname); err != nil {
				return err
			}
			if err := removeEntry(root, name); err != nil {
				return err
			}
			if err := root.Symlink(hdr.Linkname, name); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%w: %q has type %q (only files, directories and symlinks)", ErrUnsafe, name, string(hdr.Typeflag))
		}
	}
	// Permissions last, deepest first: a read-only directory must not block its own content.
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := root.Chmod(dirs[i].path, dirs[i].mode); err != nil {
			return err
		}
	}
	return nil
}

// cleanName turns an entry name into a clean relative slash path ("" for the root). It refuses
// absolute names and any ".." component.
func cleanName(raw string) (string, error) {
	if strings.HasPrefix(raw, "/") || strings.ContainsRune(raw, 0) {
		return "", fmt.Errorf("%w: absolute name %q", ErrUnsafe, raw)
	}
	var parts []string
	for _, c := range strings.Split(raw, "/") {
		switch c {
		case "", ".":
		case "..":
			return "", fmt.Errorf("%w: %q leaves the directory", ErrUnsafe, raw)
		default:
			parts = append(parts, c)
		}
	}
	return strings.Join(parts, "/"), nil
}

// checkLink accepts a symlink target that stays inside the tree however the tree's other
// symlinks resolve: relative, its ".." components only at the start, and no more of them than
// the link is deep.
func checkLink(name, target string) error {
	if target == "" || strings.HasPrefix(target, "/") || strings.ContainsRune(target, 0) {
		return fmt.Errorf("%w: symlink %q points to %q, outside the directory", ErrUnsafe, name, target)
	}
	up, named := 0, false
	for _, c := range strings.Split(target, "/") {
		switch c {
		case "", ".":
		case "..":
			if named {
				return fmt.Errorf("%w: symlink %q points to %q (\"..\" after a name)", ErrUnsafe, name, target)
			}
			up++
		default:
			named = true
		}
	}
	if depth := strings.Count(name, "/"); up > depth {
		return fmt.Errorf("%w: symlink %q points to %q, outside the directory", ErrUnsafe, name, target)
	}
	return nil
}

// makeParents makes sure every parent of name in root is a real directory (never a symlink),
// creating missing ones.
func makeParents(root *os.Root, name string) error {
	parts := strings.Split(name, "/")
	p := ""
	for _, c := range parts[:len(parts)-1] {
		p = path.Join(p, c)
		info, err := root.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := root.Mkdir(p, 0o700); err != nil {
				return err
			}
		case err != nil:
			return err
		case info.Mode().Type() == fs.ModeSymlink:
			return fmt.Errorf("%w: %q would be written through a symlink", ErrUnsafe, name)
		case !info.IsDir():
			return fmt.Errorf("%w: a parent of %q is not a directory", ErrUnsafe, name)
		}
	}
	return nil
}

// makeDir creates the directory name (private until the final chmod); an existing file or
// symlink there is replaced.
func makeDir(root *os.Root, name string) error {
	info, err := root.Lstat(name)
	if err == nil && info.IsDir() {
		return nil
	}
	if err := removeEntry(root, name); err != nil {
		return err
	}
	return root.Mkdir(name, 0o700)
}

// removeEntry removes a file or symlink at name (later entries win) but never a directory.
func removeEntry(root *os.Root, name string) error {
	info, err := root.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if info.IsDir() {
		return fmt.Errorf("%w: %q replaces a directory", ErrUnsafe, name)
	}
	return root.Remove(name)
}

// writeFile creates name (never following a symlink: it was removed and O_EXCL refuses one
// that appears) with r's content and mode perm.
func writeFile(root *os.Root, name string, r io.Reader, perm fs.FileMode) error {
	if err := removeEntry(root, name); err != nil {
		return err
	}
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return fmt.Errorf("archive: %s: %w", name, err)
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// countingReader counts the bytes read (an empty stream is not an empty archive).
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
