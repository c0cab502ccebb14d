package local

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	goruntime "runtime"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/netutil"
	"golang.org/x/sys/unix"
)

// A network namespace per gateway (as root). Every gateway's sandbox gets a network namespace
// of its own (bwrap --unshare-net): only a loopback, on which the gateway listens. Code in an
// agent then sees no socket of this host (no /proc/net of others), cannot connect to another
// agent's gateway or to any service on the host's loopback, cannot take a port another
// gateway or the manager wants, and cannot listen on the host's addresses. The manager, which
// can enter the namespace, carries what must cross it:
//
//   - in: a door on the host's loopback at the gateway's port; each connection to it is
//     dialled from inside the gateway's namespace, so the engine sees a loopback client as it
//     did on the host's network (its endpoint, health checks, the facade's proxies unchanged);
//   - out: a listener inside the namespace at each of Options.HostServices' addresses (the
//     model proxy), forwarded to the same address on the host, and one at PlatformAddr
//     forwarded to Options.PlatformService: nothing else on the host is reachable, and there
//     is no route out.
//
// Commands of an agent whose gateway runs (console exec, engine commands) join the gateway's
// namespace, so they reach it at 127.0.0.1 as its own CLI expects; with no gateway they get an
// empty one.
//
// As an ordinary user the same, but for how the manager reaches into a namespace: bwrap makes
// it inside a user namespace the manager cannot enter, so the sockets it listens and dials
// with in there come from the sandbox's network helper (nethelper.go), and a command, which
// cannot join its gateway's namespace either, gets one of its own served the same way, with
// its gateway's port forwarded to the gateway's door (commandNet).

// maxAgentConns bounds the connections an agent holds open through each of the manager's
// listeners in its namespace (a host service, the egress proxy): each costs the manager two
// sockets, and an agent must not exhaust the manager's files. Further ones wait in the
// listen queue until one ends.
const maxAgentConns = 256

// netNamespace is a network namespace the manager makes sockets in: as root one it holds
// and enters (heldNS), as an ordinary user one whose helper makes them (helperNS,
// nethelper.go).
type netNamespace interface {
	// socket is a fresh TCP socket (IPv4, close-on-exec) of the namespace, the caller's.
	socket() (int, error)
	// dup is a copy of the namespace's fd for a command to join (nil: it cannot be joined).
	dup() *os.File
	close()
}

// heldNS is a network namespace the manager holds open and enters (as root).
type heldNS struct{ f *os.File }

func (n heldNS) socket() (fd int, err error) {
	err = inNetNS(n.f, func() (err error) {
		fd, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		return err
	})
	return fd, err
}

func (n heldNS) dup() *os.File {
	fd, err := unix.FcntlInt(n.f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	return os.NewFile(uintptr(fd), "netns")
}

func (n heldNS) close() { n.f.Close() }

// gatewayNet is what the manager serves for one sandbox's network namespace (a gateway's, or
// an ordinary user's command's).
type gatewayNet struct {
	ns  netNamespace
	ls  []net.Listener // the door, and the host services' listeners inside
	mu  sync.Mutex
	cs  map[net.Conn]struct{} // forwarded connections, both ends
	end bool
}

// dup is a copy of the namespace's fd (nil when it cannot be made), the caller's to close.
func (g *gatewayNet) dup() *os.File { return g.ns.dup() }

// nsPath is where another process (nsenter, as root) finds the namespace f holds while this
// process keeps f open.
func nsPath(f *os.File) string {
	return "/proc/" + strconv.Itoa(os.Getpid()) + "/fd/" + strconv.Itoa(int(f.Fd()))
}

// close ends the door, the listeners and every forwarded connection, and lets go of the
// namespace (the kernel frees it once the gateway is gone too).
func (g *gatewayNet) close() {
	g.mu.Lock()
	if g.end {
		g.mu.Unlock()
		return
	}
	g.end = true
	for _, l := range g.ls {
		l.Close()
	}
	for c := range g.cs {
		c.Close()
	}
	g.cs = nil
	g.mu.Unlock()
	g.ns.close()
}

// track records c to be closed with g (false: g is closed, and c with it).
func (g *gatewayNet) track(c net.Conn) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.end {
		c.Close()
		return false
	}
	g.cs[c] = struct{}{}
	return true
}

func (g *gatewayNet) untrack(c net.Conn) {
	g.mu.Lock()
	delete(g.cs, c)
	g.mu.Unlock()
	c.Close()
}

// hostNetNS is the inode of the manager's own network namespace: the calling thread's. Not
// /proc/self's, which is the main thread's: Go runs goroutines there too, and while one of
// them is in a gateway's namespace (inNetNS) that is the namespace /proc/self shows. A
// restored gateway was then taken for one in the host's namespace and started anew (make
// test, 2026-12-06). Every thread in another namespace is locked to the goroutine that put it
// there, so the caller's, never locked there, is in the manager's.
func hostNetNS() (uint64, error) { return netNSOf("thread-self") }

// netNSOf is the inode of the network namespace of process pid ("thread-self": the calling
// thread's).
func netNSOf(pid string) (uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/"+pid+"/ns/net", &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

// openNetNS opens the network namespace of the sandbox that gateway process p is or started:
// its init's (bwrap's child, born in the namespace; an adopted or restored gateway may be the
// init itself), waiting for bwrap to make it.
func openNetNS(p *process) (*os.File, error) {
	host, err := hostNetNS()
	if err != nil {
		return nil, err
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		pid, found := p.pid, p.adopted
		if init := sandboxInit(p.pid); init.pid != 0 {
			pid, found = init.pid, true
		}
		if found {
			f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/ns/net")
			if err != nil {
				return nil, fmt.Errorf("the gateway's network namespace: %w", err)
			}
			var st syscall.Stat_t
			if err := syscall.Fstat(int(f.Fd()), &st); err != nil || st.Ino == host {
				f.Close()
				return nil, fmt.Errorf("the gateway (pid %d) runs in the host's network namespace", p.pid)
			}
			return f, nil
		}
		if p.hasExited() || time.Now().After(deadline) {
			return nil, fmt.Errorf("the gateway (pid %d) made no sandbox", p.pid)
		}
	}
}

// inNetNS runs fn on a thread that is in the namespace ns, and nowhere else: sockets fn makes
// belong to ns for their life. The thread goes back to the manager's namespace after fn; if it
// cannot, it ends with its goroutine (it stays locked) instead of serving other goroutines.
func inNetNS(ns *os.File, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		goruntime.LockOSThread()
		self, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			goruntime.UnlockOSThread()
			errc <- err
			return
		}
		defer self.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			goruntime.UnlockOSThread()
			errc <- fmt.Errorf("enter the gateway's network namespace: %w", err)
			return
		}
		ferr := fn()
		if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("leave the gateway's network namespace: %w", err))
			return // the thread stays locked and ends with this goroutine
		}
		goruntime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// plumbNet serves the network namespace of gateway process p of home listening on inner in
// it (port, or a template's port: state.inSandbox) and on port on the host's loopback: the
// door on the host's loopback and the host services inside. It is closed when p exits.
func (r *Runtime) plumbNet(p *process, port, inner int, home string) error {
	if !r.netns {
		return nil
	}
	var ns netNamespace
	if r.sbx.root {
		f, err := openNetNS(p)
		if err != nil {
			return err
		}
		ns = heldNS{f}
	} else {
		// A gateway adopted from an earlier manager has had its helper for long (or, started
		// by a version before the helper, none): one try, so as not to hold the start.
		h, err := openHelperNS(p.pid, func() bool { return !p.adopted && !p.hasExited() }, netDirOf(home))
		if err != nil {
			return err
		}
		ns = h
	}
	g := &gatewayNet{ns: ns, cs: map[net.Conn]struct{}{}}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	door, err := net.Listen("tcp4", addr)
	if err != nil {
		g.close()
		return fmt.Errorf("the gateway's door on the host's %s: %w", addr, err)
	}
	g.ls = append(g.ls, door)
	inside := "127.0.0.1:" + strconv.Itoa(inner)
	go g.forward(door, func() (net.Conn, error) { return dialIn(ns, inside) })
	if err := r.serveInside(g); err != nil {
		g.close()
		return err
	}
	p.setNet(g)
	return nil
}

// PlatformAddr is where a gateway reaches the platform's own service (Options.PlatformService)
// inside its network namespace, whatever port that has on the host: the address a gateway's
// environment names the platform by (Options.GatewayEnv). Beside the egress proxy's; no
// gateway listens there (gateways take ports of Options.PortRange or templatePort).
const PlatformAddr = "127.0.0.1:3129"

// platformAddr is the address gateways reach Options.PlatformService at: PlatformAddr in
// their network namespaces, else (no namespaces, or a host service taking that address) the
// service's own.
func (r *Runtime) platformAddr() string {
	svc := r.opts.PlatformService
	if !r.netns || svc == "" || slices.Contains(r.opts.HostServices, PlatformAddr) {
		return svc
	}
	return PlatformAddr
}

// serveInside listens in g's namespace at each of the host services' addresses, forwarded to
// the same address on the host, at PlatformAddr, forwarded to the platform's service, and at
// the egress proxy's.
func (r *Runtime) serveInside(g *gatewayNet) error {
	in := map[string]string{}
	for _, svc := range r.opts.HostServices {
		in[svc] = svc
	}
	if a := r.platformAddr(); a != r.opts.PlatformService {
		in[a] = r.opts.PlatformService
	}
	for addr, host := range in {
		l, err := g.listenIn(addr)
		if err != nil {
			return fmt.Errorf("the host service %s in the sandbox's network namespace at %s: %w", host, addr, err)
		}
		go g.forward(l, func() (net.Conn, error) { return net.DialTimeout("tcp4", host, 10*time.Second) })
	}
	if r.egress != nil {
		l, err := g.listenIn(EgressProxyAddr)
		if err != nil {
			return fmt.Errorf("the egress proxy in the sandbox's network namespace: %w", err)
		}
		go func() { _ = r.egress.Serve(l) }()
	}
	return nil
}

// loopbackBound is how long a bind in a sandbox's network namespace waits for its loopback
// to have its address (as long as openNetNS waits for the sandbox).
const loopbackBound = 30 * time.Second

// bindWhenUp binds fd to sa, waiting while the address is not there yet: bwrap brings the
// new namespace's loopback up in the sandbox's first process, which the manager may enter
// first (a bind then fails with EADDRNOTAVAIL on a busy machine).
func bindWhenUp(fd int, sa unix.Sockaddr) error {
	deadline := time.Now().Add(loopbackBound)
	for {
		err := unix.Bind(fd, sa)
		if !errors.Is(err, unix.EADDRNOTAVAIL) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// listenIn listens at addr inside g's namespace, closed with g, for at most maxAgentConns
// connections at a time.
func (g *gatewayNet) listenIn(addr string) (net.Listener, error) {
	sa, err := inet4(addr)
	if err != nil {
		return nil, err
	}
	fd, err := g.ns.socket()
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "listener")
	defer f.Close()
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		return nil, err
	}
	if err := bindWhenUp(fd, sa); err != nil {
		return nil, fmt.Errorf("bind %s: %w", addr, err)
	}
	if err := unix.Listen(fd, unix.SOMAXCONN); err != nil {
		return nil, err
	}
	l, err := net.FileListener(f)
	if err != nil {
		return nil, err
	}
	g.ls = append(g.ls, l)
	return netutil.LimitListener(l, maxAgentConns), nil
}

// dialIn connects to addr from inside the namespace ns (within 10 s).
func dialIn(ns netNamespace, addr string) (net.Conn, error) {
	sa, err := inet4(addr)
	if err != nil {
		return nil, err
	}
	fd, err := ns.socket()
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "conn")
	defer f.Close()
	// A blocking connect, bounded by the send timeout (Linux applies it to connect).
	tv := unix.NsecToTimeval((10 * time.Second).Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv); err != nil {
		return nil, err
	}
	for {
		err = unix.Connect(fd, sa)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", addr, err)
	}
	return net.FileConn(f)
}

// inet4 is the socket address of addr, an IPv4 address and port.
func inet4(addr string) (*unix.SockaddrInet4, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || !ap.Addr().Is4() {
		return nil, fmt.Errorf("not an IPv4 address and port: %q", addr)
	}
	return &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}, nil
}

// forward accepts on l until it is closed, and joins each connection with one dial makes.
func (g *gatewayNet) forward(l net.Listener, dial func() (net.Conn, error)) {
	for {
		in, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			if !g.track(in) {
				return
			}
			defer g.untrack(in)
			out, err := dial()
			if err != nil {
				return // the client sees its connection closed, as a refused one
			}
			if !g.track(out) {
				return
			}
			defer g.untrack(out)
			join(in, out)
		}()
	}
}

// join copies a to b and b to a until both directions are done, passing on each half-close.
func join(a, b net.Conn) {
	done := make(chan struct{})
	go func() {
		copyHalf(b, a)
		close(done)
	}()
	copyHalf(a, b)
	<-done
}

// copyHalf copies src to dst, then closes dst's writing half (or all of dst).
func copyHalf(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	} else {
		dst.Close()
	}
}

// setupNetns turns network namespaces per gateway on when bwrap can make them on this host
// (the manager enters them as root; as an ordinary user their network helper serves it), and
// says at start whether it does.
func (r *Runtime) setupNetns() {
	switch {
	case !r.sbx.netns:
		r.noNetns = "bwrap cannot make a network namespace on this host (--unshare-net refused)"
	default:
		r.netns = true
		if slices.Contains(r.opts.HostServices, EgressProxyAddr) {
			r.opts.Log.Info("no egress proxy: a host service takes its address", "address", EgressProxyAddr)
		} else {
			r.egress = &http.Server{Handler: newEgressProxy(r.opts.Egress), ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 90 * time.Second}
		}
		r.opts.Log.Info("each gateway runs in a network namespace of its own", "hostServices", r.opts.HostServices, "egressProxy", r.egress != nil, "networkHelper", r.sbx.helper != "")
		return
	}
	r.opts.Log.Info("agents share the host's network namespace", "why", r.noNetns)
}

// Networks reports whether each gateway has a network namespace of its own and, when not, why.
func (r *Runtime) Networks() (bool, string) { return r.netns, r.noNetns }
