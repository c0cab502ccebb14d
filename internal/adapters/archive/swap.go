package archive

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// swap puts the directory tmp in place of dir and removes the old content. Where the kernel
// can (renameat2 RENAME_EXCHANGE) the two are exchanged in one step, so dir never goes
// missing; otherwise dir is renamed aside (dir.old-*), tmp renamed to dir, and the old one
// renamed back if that fails.
func swap(tmp, dir string) error {
	parent := filepath.Dir(dir)
	_, err := os.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.Rename(tmp, dir); err != nil {
			return err
		}
		return SyncDir(parent)
	case err != nil:
		return err
	}
	if err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, dir, unix.RENAME_EXCHANGE); err == nil {
		// tmp now holds the old content.
		if err := SyncDir(parent); err != nil {
			return err
		}
		return RemoveAll(tmp)
	}
	old, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".old-")
	if err != nil {
		return err
	}
	if err := os.Remove(old); err != nil { // only the unique name is wanted
		return err
	}
	if err := os.Rename(dir, old); err != nil {
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		if rerr := os.Rename(old, dir); rerr != nil {
			return errors.Join(err, rerr)
		}
		return err
	}
	if err := SyncDir(parent); err != nil {
		return err
	}
	return RemoveAll(old)
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

// SyncDir flushes a directory's entries (renames, creates) to disk; a file system that cannot
// sync a directory (EINVAL) is not an error.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, unix.EINVAL) {
		return err
	}
	return nil
}
