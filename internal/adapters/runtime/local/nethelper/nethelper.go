// Package nethelper is the network helper of an ordinary user's sandboxes (the local runtime's
// nethelper.go tells why and how the manager uses it): a process inside the sandbox's network
// namespace that answers each request on a unix socket with a fresh TCP socket of that
// namespace, passed over SCM_RIGHTS, and does nothing else.
//
// Every binary that links this package is the helper when Env is set in its environment: its
// init serves and exits before the rest of the binary's packages are initialized (it imports
// almost nothing, so Go initializes it early), which keeps a helper at about 2.5 MiB of its own
// memory beside the binary's shared pages.
package nethelper

import (
	"fmt"
	"net"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Env, set in a process's environment, makes the binary the helper serving in the dir it
// names (SandboxDir inside a sandbox).
const Env = "AGENTPLANE_NET_HELPER"

// Where the helper's dir and program are inside a sandbox, and its socket's name in the dir.
const (
	SandboxDir     = "/run/agentplane"
	SandboxProgram = "/run/agentplane-net"
	Socket         = "net.sock"
)

func init() {
	if dir := os.Getenv(Env); dir != "" {
		os.Exit(serve(dir))
	}
}

// serve serves socket requests at dir's Socket until the sandbox ends.
func serve(dir string) int {
	path := filepath.Join(dir, Socket)
	_ = os.Remove(path) // a former gateway's of the same home
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		fmt.Fprintf(os.Stderr, "agentplane network helper: %v\n", err)
		return 1
	}
	for {
		c, err := l.AcceptUnix()
		if err != nil {
			fmt.Fprintf(os.Stderr, "agentplane network helper: %v\n", err)
			return 1
		}
		go serveRequests(c)
	}
}

// serveRequests answers each byte read on c with a fresh TCP socket (or, when none can be
// made, a reply without one).
func serveRequests(c *net.UnixConn) {
	defer c.Close()
	req := make([]byte, 1)
	for {
		if _, err := c.Read(req); err != nil {
			return
		}
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			if _, err := c.Write([]byte{1}); err != nil {
				return
			}
			continue
		}
		_, _, err = c.WriteMsgUnix([]byte{0}, unix.UnixRights(fd), nil)
		unix.Close(fd)
		if err != nil {
			return
		}
	}
}
