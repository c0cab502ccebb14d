package archive

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// swap puts the directory tmp of parent in place of its directory dir (both one path
// component) and removes the old content. Where the kernel can (renameat2 RENAME_EXCHANGE)
// the two are exchanged in one step, so dir never goes missing; otherwise dir is renamed
// aside (dir.old-*), tmp renamed to dir, and the old one renamed back if that fails.
func swap(parent *os.Root, tmp, dir string) error {
	d, err := parent.Open(".")
	if err != nil {
		return err
	}
	defer d.Close()
	_, err = parent.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := parent.Rename(tmp, dir); err != nil {
			return err
		}
		return syncFile(d)
	case err != nil:
		return err
	}
	fd := int(d.Fd())
	if err := unix.Renameat2(fd, tmp, fd, dir, unix.RENAME_EXCHANGE); err == nil {
		// tmp now holds the old content.
		if err := syncFile(d); err != nil {
			return err
		}
		return RemoveAllIn(parent, tmp)
	}
	old, err := mkdirTemp(parent, "."+dir+".old-")
	if err != nil {
		return err
	}
	if err := parent.Remove(old); err != nil { // only the unique name is wanted
		return err
	}
	if err := parent.Rename(dir, old); err != nil {
		return err
	}
	if err := parent.Rename(tmp, dir); err != nil {
		if rerr := parent.Rename(old, dir); rerr != nil {
			return errors.Join(err, rerr)
		}
		return err
	}
	if err := syncFile(d); err != nil {
		return err
	}
	return RemoveAllIn(parent, old)
}

// RemoveAll is os.RemoveAll that also copes with read-only directories in the tree.
func RemoveAll(p string) error {
	if err := os.RemoveAll(p); err == nil {
		return nil
	}
	_ = filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(q, 0o700)
		}
		return nil
	})
	return os.RemoveAll(p)
}

// RemoveAllIn is RemoveAll of name in root, never following a symlink out of it.
func RemoveAllIn(root *os.Root, name string) error {
	if err := root.RemoveAll(name); err == nil {
		return nil
	}
	_ = fs.WalkDir(root.FS(), name, func(q string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = root.Chmod(q, 0o700)
		}
		return nil
	})
	return root.RemoveAll(name)
}

// SyncDir flushes a directory's entries (renames, creates) to disk; a file system that cannot
// sync a directory (EINVAL) is not an error.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return syncFile(d)
}

// syncFile is SyncDir of an open directory.
func syncFile(d *os.File) error {
	if err := d.Sync(); err != nil && !errors.Is(err, unix.EINVAL) {
		return err
	}
	return nil
}
