package local

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentplane/agentplane/internal/adapters/runtime/local/nethelper"
)

// The network helper: how the manager makes sockets in an ordinary user's sandbox.
//
// As an ordinary user, bwrap makes each sandbox's network namespace inside a user namespace of
// its own, which the manager cannot enter (setns needs CAP_SYS_ADMIN over the namespace, and
// a multithreaded process cannot join a user namespace). A socket belongs to the namespace
// it was made in for its life, wherever its fd goes; so a helper inside the sandbox makes
// them: it listens on a unix socket in a dir the manager binds into the sandbox (a unix socket
// is reached by its path across network namespaces) and answers each request with a fresh
// TCP socket, passed over SCM_RIGHTS. The manager binds, listens or connects it (netns.go)
// exactly as it does the sockets it makes itself as root. The helper does nothing else: it
// cannot reach out of the sandbox, and an agent that replaces or kills it harms only itself
// (the manager takes only a fresh, unbound TCP socket, from a process of that very sandbox).
//
// The helper is this executable (package nethelper: every binary that links the runtime
// carries it, as the test engine's binaries do fakeclaw), bound read-only into the sandbox and
// started by the sandbox's shell beside the command.

// netGateFD is the fd a command's sandbox reads its gate from (after the seccomp filter's):
// the command starts once the manager has served its network namespace (a line), or not at
// all (end of file).
const netGateFD = seccompFD + 1

// helperNS is the network namespace of an ordinary user's sandbox, reached through its
// helper: one connection, made to the helper of that sandbox (checked once, by the peer's
// pid), that later changes to the path do not redirect.
type helperNS struct {
	mu sync.Mutex
	c  *net.UnixConn
}

// netDirOf is the host dir bound at nethelper.SandboxDir into the sandbox of a gateway of home.
func netDirOf(home string) string { return filepath.Join(filepath.Dir(home), "net") }

// openHelperNS connects to the helper in dir of the sandbox that process pid (bwrap, or the
// sandbox's init) started, waiting for the helper to listen while running says the process
// runs (at most 30 s).
func openHelperNS(pid int, running func() bool, dir string) (*helperNS, error) {
	d, err := os.OpenFile(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("the sandbox's network dir: %w", err)
	}
	defer d.Close()
	// Through the dir's fd: the socket's path within the length a unix address allows.
	addr := &net.UnixAddr{Name: "/proc/self/fd/" + strconv.Itoa(int(d.Fd())) + "/" + nethelper.Socket, Net: "unix"}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		c, err := net.DialUnix("unix", nil, addr)
		if err == nil {
			if err = checkHelper(c, pid); err == nil {
				return &helperNS{c: c}, nil
			}
			c.Close()
		}
		if !running() || time.Now().After(deadline) {
			return nil, fmt.Errorf("the network helper of the sandbox of pid %d: %w", pid, err)
		}
	}
}

// checkHelper: the process at c's other end runs in the sandbox that process sandbox is or
// started.
func checkHelper(c *net.UnixConn, sandbox int) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) { cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); err != nil {
		return err
	}
	if cerr != nil {
		return cerr
	}
	for pid, hops := int(cred.Pid), 0; pid > 1 && hops < 64; hops++ {
		if pid == sandbox {
			return nil
		}
		st, err := readProcStat(pid)
		if err != nil {
			break
		}
		pid = st.ppid
	}
	return fmt.Errorf("the process serving the sandbox's network dir (pid %d) is not in the sandbox of pid %d", cred.Pid, sandbox)
}

// socket asks the helper for a socket of its namespace: a fresh TCP socket (IPv4, neither
// bound nor connected), close-on-exec, the caller's to close.
func (n *helperNS) socket() (int, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.c == nil {
		return -1, net.ErrClosed
	}
	if err := n.c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return -1, err
	}
	if _, err := n.c.Write([]byte{0}); err != nil {
		return -1, fmt.Errorf("the network helper: %w", err)
	}
	b, oob := make([]byte, 1), make([]byte, unix.CmsgSpace(4))
	_, oobn, _, _, err := n.c.ReadMsgUnix(b, oob) // close-on-exec (MSG_CMSG_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("the network helper: %w", err)
	}
	var fds []int
	if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
		for _, m := range msgs {
			if got, err := unix.ParseUnixRights(&m); err == nil {
				fds = append(fds, got...)
			}
		}
	}
	if len(fds) != 1 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return -1, errors.New("the network helper made no socket")
	}
	if err := checkFreshSocket(fds[0]); err != nil {
		unix.Close(fds[0])
		return -1, err
	}
	return fds[0], nil
}

// checkFreshSocket: fd is a TCP socket over IPv4, not listening, bound to no port and
// connected to nothing (what an agent that replaced its helper might pass is nothing else).
func checkFreshSocket(fd int) error {
	for opt, want := range map[int]int{unix.SO_DOMAIN: unix.AF_INET, unix.SO_TYPE: unix.SOCK_STREAM, unix.SO_PROTOCOL: unix.IPPROTO_TCP, unix.SO_ACCEPTCONN: 0} {
		if v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, opt); err != nil || v != want {
			return fmt.Errorf("the network helper passed a socket that is not a fresh TCP one (option %d: %d, %v)", opt, v, err)
		}
	}
	sa, err := unix.Getsockname(fd)
	if in4, ok := sa.(*unix.SockaddrInet4); err != nil || !ok || in4.Port != 0 || in4.Addr != [4]byte{} {
		return fmt.Errorf("the network helper passed a bound socket (%v)", err)
	}
	if _, err := unix.Getpeername(fd); !errors.Is(err, unix.ENOTCONN) {
		return errors.New("the network helper passed a connected socket")
	}
	return nil
}

func (n *helperNS) close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.c != nil {
		n.c.Close()
		n.c = nil
	}
}

// dup: a command cannot join a namespace the manager cannot enter (it gets one of its own,
// commandNet).
func (n *helperNS) dup() *os.File { return nil }

// gatewayHelper is the network helper of a sandbox of a gateway of home, its dir made (nil:
// the sandbox has no network namespace, or the manager makes its sockets itself, as root).
func (r *Runtime) gatewayHelper(home string) (*sandboxNet, error) {
	if !r.netns || r.sbx.helper == "" {
		return nil, nil
	}
	dir := netDirOf(home)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("the sandbox's network dir: %w", err)
	}
	return &sandboxNet{dir: dir}, nil
}

// commandNet is the network namespace of an ordinary user's command whose gateway runs,
// served as the gateway's is (the host services, the egress proxy) and with the gateway at
// 127.0.0.1 on its port (forwarded to its door on the host), where the engine's CLI looks
// for it. As root a command joins its gateway's namespace instead.
type commandNet struct {
	r            *Runtime
	spec         *sandboxNet
	port         int
	gateR, gateW *os.File
	g            *gatewayNet
}

// newCommandNet makes the helper's dir (in the agent's dir) and the gate of a command of the
// agent whose gateway listens on port.
func (r *Runtime) newCommandNet(agentDir string, port int) (*commandNet, error) {
	dir, err := os.MkdirTemp(agentDir, "net-exec-")
	if err != nil {
		return nil, err
	}
	gateR, gateW, err := os.Pipe()
	if err != nil {
		os.Remove(dir)
		return nil, err
	}
	return &commandNet{r: r, spec: &sandboxNet{dir: dir, gate: true}, port: port, gateR: gateR, gateW: gateW}, nil
}

// serve serves the namespace of the command started as pid and opens its gate; if it cannot,
// the command ends without running (the sandbox's shell says why) and the manager logs it.
func (c *commandNet) serve(pid int) {
	defer c.gateW.Close()
	err := func() error {
		h, err := openHelperNS(pid, func() bool { return procAlive(pid, 0) }, c.spec.dir)
		if err != nil {
			return err
		}
		c.g = &gatewayNet{ns: h, cs: map[net.Conn]struct{}{}}
		addr := "127.0.0.1:" + strconv.Itoa(c.port)
		l, err := c.g.listenIn(addr)
		if err != nil {
			return fmt.Errorf("the gateway's port in the command's network namespace: %w", err)
		}
		go c.g.forward(l, func() (net.Conn, error) { return net.DialTimeout("tcp4", addr, 10*time.Second) })
		if err := c.r.serveInside(c.g); err != nil {
			return err
		}
		_, err = c.gateW.Write([]byte("\n"))
		return err
	}()
	if err != nil {
		c.r.opts.Log.Error(err, "cannot serve a command's network namespace", "pid", pid)
	}
}

// close ends what serve started and removes the helper's dir.
func (c *commandNet) close() {
	if c.g != nil {
		c.g.close()
	}
	c.gateR.Close()
	c.gateW.Close()
	os.RemoveAll(c.spec.dir)
}
