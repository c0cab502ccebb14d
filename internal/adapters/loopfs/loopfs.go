// Package loopfs makes filesystems of a bounded size: an ext4 filesystem in a sparse image
// file, loop-mounted nosuid, nodev, noatime and discard (what is deleted in it goes back to
// the host). Whoever writes into one gets ENOSPC there and nowhere else. An empty one takes
// about 3 MiB of disk. The local runtime gives each agent's home one (as root); the local
// cluster's provisioner gives each claim on the real node one, as a cloud's disks would.
package loopfs

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// Tools are the host's programs that make and mount the filesystems.
type Tools struct {
	mkfs, mount string
}

// Find returns the Tools once this process may mount (root) and the programs are installed;
// the error says why not.
func Find() (Tools, error) {
	if os.Geteuid() != 0 {
		return Tools{}, errors.New("not root: cannot mount a volume")
	}
	var t Tools
	var err error
	if t.mkfs, err = exec.LookPath("mkfs.ext4"); err != nil {
		return Tools{}, errors.New("mkfs.ext4 (e2fsprogs) is not installed")
	}
	if t.mount, err = exec.LookPath("mount"); err != nil {
		return Tools{}, errors.New("mount (util-linux) is not installed")
	}
	return t, nil
}

// Make makes a sparse image of size bytes at img with an empty ext4 filesystem: no blocks
// reserved for root, and neither the journal nor the inode tables written out (the file's
// holes read as zeros already). img appears only once complete.
func (t Tools) Make(img string, size int64) error {
	tmp := img + ".new"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		var out []byte
		out, err = exec.Command(t.mkfs, "-q", "-F", "-m", "0", "-E", "lazy_itable_init=1,lazy_journal_init=1", tmp).CombinedOutput()
		if err != nil {
			err = fmt.Errorf("make the volume's filesystem: %v: %s", err, strings.TrimSpace(string(out)))
		}
	}
	if err == nil {
		err = os.Rename(tmp, img)
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}

// Mount mounts the image img at dir, and removes the new filesystem's lost+found (e2fsck
// makes it again if it needs one): the volume's root holds only what its user puts there.
func (t Tools) Mount(img, dir string) error {
	if out, err := exec.Command(t.mount, "-t", "ext4", "-o", "loop,nosuid,nodev,noatime,discard", img, dir).CombinedOutput(); err != nil {
		return fmt.Errorf("mount the volume: %v: %s", err, strings.TrimSpace(string(out)))
	}
	_ = os.Remove(dir + "/lost+found")
	return nil
}

// Mounted reports whether a filesystem is mounted at p.
func Mounted(p string) bool {
	mounted, err := mountinfo.Mounted(p)
	return err == nil && mounted
}

// Unmount unmounts the volume mounted at dir, if any (lazily when it is still busy: the loop
// device goes once the last user does).
func Unmount(dir string) error {
	if !Mounted(dir) {
		return nil
	}
	err := unix.Unmount(dir, 0)
	if errors.Is(err, unix.EBUSY) {
		err = unix.Unmount(dir, unix.MNT_DETACH)
	}
	if err != nil && !errors.Is(err, unix.EINVAL) { // EINVAL: not a mount point (any more)
		return fmt.Errorf("unmount %s: %w", dir, err)
	}
	return nil
}
