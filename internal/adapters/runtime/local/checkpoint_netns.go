package local

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// A checkpoint leaves the sandbox's network namespace out. A gateway's namespace holds only a
// loopback (bwrap --unshare-net; netns.go): nothing in it is worth keeping over a sleep, and
// CRIU, which dumps and makes a namespace again with `ip` and `iptables-restore` (six programs
// run one after the other), spent about 100 ms of a 350 ms restore on it (2026-12-06, CRIU
// 4.1.1: hack/bench/checkpoint with CRIU's log at -v4). So the dump names the namespace
// external (--external net[<inode>]:netnsKey) and writes netnsExternalFile beside its
// images; the restore of such a checkpoint is given a namespace the runtime made
// (newLoopbackNetNS) on an inherited file (--inherit-fd), which the restored tree enters, as
// the namespace bwrap made for it at its start. A copy of a template gets a namespace of its
// own the same way. A checkpoint without the file, dumped by an earlier version, has CRIU
// make the namespace from its images, as before.
const (
	// netnsKey names the sandbox's network namespace in a dump that left it external.
	netnsKey = "agent-net"
	// netnsExternalFile, in a checkpoint's dir, says its dump left the namespace external.
	netnsExternalFile = "netns-external"
	// netnsFD is the namespace's fd in the restoring CRIU (its first extra file).
	netnsFD = 3
)

// externalNetNSArgs are the dump options that leave the network namespace of process pid
// out, when it has one of its own (none when it shares the manager's).
func externalNetNSArgs(pid int) ([]string, error) {
	host, err := hostNetNS()
	if err != nil {
		return nil, err
	}
	ino, err := netNSOf(strconv.Itoa(pid))
	if err != nil {
		return nil, fmt.Errorf("the sandbox's network namespace: %w", err)
	}
	if ino == host {
		return nil, nil
	}
	return []string{"--external", fmt.Sprintf("net[%d]:%s", ino, netnsKey)}, nil
}

// markNetNSExternal records in the checkpoint dir that its dump left the namespace out.
func markNetNSExternal(dir string) error {
	return os.WriteFile(filepath.Join(dir, netnsExternalFile), nil, 0o600)
}

// restoreNetNS is what a restore of the images in dir needs for its network namespace: none
// when the dump kept it (CRIU makes it), else a new one, the options that give it to the
// restored tree, and the file to pass to CRIU as its first extra file (the caller closes it
// once CRIU has ended).
func restoreNetNS(dir string) (*os.File, []string, error) {
	if _, err := os.Stat(filepath.Join(dir, netnsExternalFile)); errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	} else if err != nil {
		return nil, nil, err
	}
	ns, err := newLoopbackNetNS()
	if err != nil {
		return nil, nil, fmt.Errorf("a network namespace for the restored gateway: %w", err)
	}
	return ns, []string{"--inherit-fd", fmt.Sprintf("fd[%d]:%s", netnsFD, netnsKey)}, nil
}

// newLoopbackNetNS makes a network namespace whose loopback is up (127.0.0.1 and ::1, as
// bwrap --unshare-net leaves a sandbox's) and returns it open. The thread that made it is in
// it for good, so it ends with its goroutine, still locked: no other goroutine ever runs
// there (the process's main thread is parked instead of ended, and /proc/self/ then shows
// this namespace: the host's is read through /proc/thread-self, hostNetNS).
func newLoopbackNetNS() (*os.File, error) {
	type made struct {
		f   *os.File
		err error
	}
	out := make(chan made, 1)
	go func() {
		goruntime.LockOSThread() // never unlocked: the thread ends with this goroutine
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			out <- made{err: fmt.Errorf("unshare: %w", err)}
			return
		}
		f, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			out <- made{err: err}
			return
		}
		if err := loopbackUp(); err != nil {
			f.Close()
			out <- made{err: err}
			return
		}
		out <- made{f: f}
	}()
	m := <-out
	return m.f, m.err
}

// loopbackUp brings up the loopback of the calling thread's network namespace; the kernel
// gives it 127.0.0.1/8 and ::1.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback's flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback up: %w", err)
	}
	return nil
}
