// Package lockprobe is the process of the local runtime's test checkpoint (checkpoint_probe.go):
// it holds a file the way SQLite holds a database's WAL index, mapped shared and read-locked
// (a POSIX lock on one byte), and sleeps. A restore that drops that lock (CRIU 4.1.1 unpatched:
// its restorer closes the files it maps through after taking the task's locks) would let the
// next process to open a restored gateway's database truncate the index under it; the runtime
// turns checkpoints off when the restored probe no longer holds its lock.
//
// Every binary that links this package is the probe when Env is set in its environment: its
// init holds the file Env names and never returns (it imports almost nothing, so Go initializes
// it before the rest of the binary's packages).
package lockprobe

import (
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Env, set in a process's environment, makes the binary the probe holding the file it names.
const Env = "AGENTPLANE_LOCK_PROBE"

// Offset is the byte the probe read-locks: the one SQLite's connections lock on a WAL index
// for as long as they are open (its "DMS" byte).
const Offset = 128

// Size is the size of the probe's file, which it maps whole.
const Size = 4096

func init() {
	if path := os.Getenv(Env); path != "" {
		if err := hold(path); err != nil {
			fmt.Fprintf(os.Stderr, "agentplane lock probe: %v\n", err)
			os.Exit(1)
		}
	}
}

// hold maps path shared, read-locks its Offset byte and sleeps for good.
func hold(path string) error {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	if _, err := unix.Mmap(fd, 0, Size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
		return fmt.Errorf("mmap %s: %w", path, err)
	}
	lk := unix.Flock_t{Type: unix.F_RDLCK, Whence: 0, Start: Offset, Len: 1}
	if err := unix.FcntlFlock(uintptr(fd), unix.F_SETLK, &lk); err != nil {
		return fmt.Errorf("lock %s: %w", path, err)
	}
	for {
		time.Sleep(time.Hour)
	}
}

// Held tells whether a process holds a lock on path's Offset byte (F_GETLK: a write lock there
// would conflict with it), as seen from another process.
func Held(path string) (bool, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, err
	}
	defer unix.Close(fd)
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: Offset, Len: 1}
	if err := unix.FcntlFlock(uintptr(fd), unix.F_GETLK, &lk); err != nil {
		return false, err
	}
	return lk.Type != unix.F_UNLCK, nil
}
