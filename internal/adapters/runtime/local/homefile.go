package local

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// An agent's home is the agent's: code in the agent can replace any dir or file in it with a
// symlink at any time (say ~/.openclaw with a link to another agent's). So every path the
// manager reads or writes in a home goes through the home opened as an os.Root: a link that
// leads out of the home is refused, never followed, whatever it is swapped for meanwhile.

// writeHomeFile writes data to rel (a clean path relative to root, the home opened as a root)
// atomically: a temp file next to it is written, synced, given mode perm, passed to
// beforeRename (when set) by its path relative to root, and renamed over rel, so readers see
// the old or the new content. Missing parent dirs are made (0700).
func writeHomeFile(root *os.Root, rel string, data []byte, perm fs.FileMode, beforeRename func(tmp string)) error {
	parent, base := filepath.Dir(rel), filepath.Base(rel)
	if err := root.MkdirAll(parent, 0o700); err != nil {
		return err
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(parent, "."+base+".tmp-"+hex.EncodeToString(rnd[:]))
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	err = writeAndSync(f, data, perm)
	if err == nil && beforeRename != nil {
		beforeRename(tmp)
	}
	if err == nil {
		err = root.Rename(tmp, rel)
	}
	if err != nil {
		_ = root.Remove(tmp)
		return err
	}
	if d, err := root.Open(parent); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// writeOwned writes rel of the home home like writeHomeFile, given to the agent's sandbox
// uid before it appears under its name: a command in the sandbox never meets it unreadable (a
// root-owned 0600 engine config, between the rename and a chown after it, reads as nothing).
func (r *Runtime) writeOwned(home, rel string, data []byte, perm fs.FileMode) error {
	root, err := os.OpenRoot(home)
	if err != nil {
		return err
	}
	defer root.Close()
	return writeHomeFile(root, rel, data, perm, func(tmp string) { r.own(home, filepath.Join(home, tmp)) })
}

// mkdirInHome makes rel and its missing parents in the home home (0700), through the home as
// a root; it reports whether rel was missing.
func mkdirInHome(home, rel string) (made bool, err error) {
	root, err := os.OpenRoot(home)
	if err != nil {
		return false, err
	}
	defer root.Close()
	if _, err := root.Lstat(rel); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	return true, root.MkdirAll(rel, 0o700)
}
