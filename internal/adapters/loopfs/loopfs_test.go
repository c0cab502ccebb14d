package loopfs_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentplane/agentplane/internal/adapters/loopfs"
	"github.com/agentplane/agentplane/internal/devtools/testenv"
)

// TestVolumeIsBounded: a volume of 32 MiB takes a little of the host's disk while empty,
// refuses a reservation of twice its size with ENOSPC, keeps what was written across an
// unmount and a mount, and leaves no mount behind.
func TestVolumeIsBounded(t *testing.T) {
	tools, err := loopfs.Find()
	if err != nil {
		testenv.Skip(t, "%v", err)
	}
	dir := t.TempDir()
	img, mnt := filepath.Join(dir, "v.img"), filepath.Join(dir, "v")
	const size = 32 << 20
	if err := tools.Make(img, size); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := tools.Mount(img, mnt); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = loopfs.Unmount(mnt) })
	if !loopfs.Mounted(mnt) {
		t.Fatal("the volume is not mounted")
	}
	if entries, _ := os.ReadDir(mnt); len(entries) != 0 {
		t.Errorf("a new volume holds %v, want nothing (no lost+found)", entries)
	}
	f, err := os.Create(filepath.Join(mnt, "fill"))
	if err != nil {
		t.Fatal(err)
	}
	err = unix.Fallocate(int(f.Fd()), 0, 0, 2*size)
	f.Close()
	if !errors.Is(err, unix.ENOSPC) {
		t.Errorf("reserving %d bytes in a %d-byte volume: %v, want ENOSPC", 2*size, size, err)
	}
	// What a failed reservation took goes back with the file.
	if err := os.Remove(filepath.Join(mnt, "fill")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mnt, "kept"), []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := loopfs.Unmount(mnt); err != nil {
		t.Fatal(err)
	}
	if loopfs.Mounted(mnt) {
		t.Fatal("still mounted after Unmount")
	}
	var st unix.Stat_t
	if err := unix.Stat(img, &st); err != nil || st.Blocks*512 > 8<<20 {
		t.Errorf("the image takes %d bytes of disk (%v), want a sparse one", st.Blocks*512, err)
	}
	if err := tools.Mount(img, mnt); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(mnt, "kept")); err != nil || string(b) != "kept" {
		t.Errorf("after a remount: %q %v", b, err)
	}
	if err := loopfs.Unmount(mnt); err != nil || loopfs.Mounted(mnt) {
		t.Fatalf("unmount: %v", err)
	}
}
