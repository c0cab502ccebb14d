package local

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentplane/agentplane/internal/adapters/runtime/local/nethelper"
)

// fakeHelper serves dir's helper socket from this process, answering the i-th request with
// what answer(i) returns: an fd to pass (closed after), or -1 for a reply without one.
func fakeHelper(t *testing.T, dir string, answer func(i int) int) {
	t.Helper()
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, nethelper.Socket), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.AcceptUnix()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				b := make([]byte, 1)
				for i := 0; ; i++ {
					if _, err := c.Read(b); err != nil {
						return
					}
					fd := answer(i)
					var oob []byte
					if fd >= 0 {
						oob = unix.UnixRights(fd)
					}
					_, _, err := c.WriteMsgUnix([]byte{0}, oob, nil)
					if fd >= 0 {
						unix.Close(fd)
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
}

// TestNetHelperSocketsAreFreshTCPOnes: what a helper passes is used only when it is a fresh
// TCP socket (IPv4, not bound, not listening, not connected): an agent that replaced its
// helper cannot hand the manager a socket that is already somewhere, nor anything else.
func TestNetHelperSocketsAreFreshTCPOnes(t *testing.T) {
	socket := func(domain, typ int) func(t *testing.T) int {
		return func(t *testing.T) int {
			fd, err := unix.Socket(domain, typ|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			return fd
		}
	}
	tcp := socket(unix.AF_INET, unix.SOCK_STREAM)
	bound := func(t *testing.T) int {
		fd := tcp(t)
		if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
			t.Fatal(err)
		}
		return fd
	}
	listening := func(t *testing.T) int {
		fd := bound(t)
		if err := unix.Listen(fd, 1); err != nil {
			t.Fatal(err)
		}
		return fd
	}
	connected := func(t *testing.T) int {
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		fd := tcp(t)
		if err := unix.Connect(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}, Port: l.Addr().(*net.TCPAddr).Port}); err != nil {
			t.Fatal(err)
		}
		return fd
	}
	file := func(t *testing.T) int {
		fd, err := unix.Open(os.DevNull, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		return fd
	}
	for _, c := range []struct {
		name string
		make func(t *testing.T) int
		ok   bool
	}{
		{"a fresh TCP socket", tcp, true},
		{"a bound one", bound, false},
		{"a listening one", listening, false},
		{"a connected one", connected, false},
		{"a UDP socket", socket(unix.AF_INET, unix.SOCK_DGRAM), false},
		{"an IPv6 one", socket(unix.AF_INET6, unix.SOCK_STREAM), false},
		{"a unix socket", socket(unix.AF_UNIX, unix.SOCK_STREAM), false},
		{"a file", file, false},
		{"nothing", func(*testing.T) int { return -1 }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			fakeHelper(t, dir, func(int) int { return c.make(t) })
			ns, err := openHelperNS(os.Getpid(), func() bool { return true }, dir)
			if err != nil {
				t.Fatal(err)
			}
			defer ns.close()
			fd, err := ns.socket()
			if c.ok != (err == nil) {
				t.Fatalf("socket: %d, %v; want it taken: %v", fd, err, c.ok)
			}
			if err == nil {
				unix.Close(fd)
			}
		})
	}
}

// TestNetHelperOfAnotherSandboxIsRefused: the manager talks to the helper of the sandbox it
// started, not to a process elsewhere that serves the dir (here this test's process, which
// is not under the "sandbox", a sleep it started).
func TestNetHelperOfAnotherSandboxIsRefused(t *testing.T) {
	dir := t.TempDir()
	fakeHelper(t, dir, func(int) int { return -1 })
	other := exec.Command("sleep", "1000")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Process.Kill(); _ = other.Wait() })
	// One try (the sleep "exits" at once): a helper that is not the sandbox's is refused.
	_, err := openHelperNS(other.Process.Pid, func() bool { return false }, dir)
	if err == nil || !strings.Contains(err.Error(), "is not in the sandbox") {
		t.Fatalf("a helper outside the sandbox: %v", err)
	}
}
