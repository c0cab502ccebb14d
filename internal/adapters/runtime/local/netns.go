package local

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
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
//     model proxy), forwarded to the same address on the host: nothing else on the host is
//     reachable, and there is no route out.
//
// Commands of an agent whose gateway runs (console exec, engine commands) join the gateway's
// namespace, so they reach it at 127.0.0.1 as its own CLI expects; with no gateway they get an
// empty one. As an ordinary user the manager cannot enter a namespace it made in a user
// namespace, and sandboxes keep the host's network (Runtime.Networks says why).

// maxAgentConns bounds the connections an agent holds open through each of the manager's
// listeners in its namespace (a host service, the egress proxy): each costs the manager two
// sockets, and an agent must not exhaust the manager's files. Further ones wait in the
// listen queue until one ends.
const maxAgentConns = 256

// gatewayNet is what the manager serves for one gateway's network namespace.
type gatewayNet struct {
	ns  *os.File       // the namespace (held open: nsenter joins it through this fd)
	ls  []net.Listener // the door, and the host services' listeners inside
	mu  sync.Mutex
	cs  map[net.Conn]struct{} // forwarded connections, both ends
	end bool
}

// dup is a copy of the namespace's fd (nil when it cannot be made), the caller's to close.
func (g *gatewayNet) dup() *os.File {
	fd, err := unix.FcntlInt(g.ns.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	return os.NewFile(uintptr(fd), "netns")
}

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
	g.ns.Close()
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

// hostNetNS is the inode of the manager's own network namespace.
func hostNetNS() (uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/self/ns/net", &st); err != nil {
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

// plumbNet serves the network namespace of gateway process p listening on port: the door on
// the host's loopback and the host services inside. It is closed when p exits.
func (r *Runtime) plumbNet(p *process, port int) error {
	if !r.netns {
		return nil
	}
	ns, err := openNetNS(p)
	if err != nil {
		return err
	}
	g := &gatewayNet{ns: ns, cs: map[net.Conn]struct{}{}}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	door, err := net.Listen("tcp4", addr)
	if err != nil {
		g.close()
		return fmt.Errorf("the gateway's door on the host's %s: %w", addr, err)
	}
	g.ls = append(g.ls, door)
	go g.forward(door, func() (net.Conn, error) { return dialIn(ns, addr) })
	for _, svc := range r.opts.HostServices {
		l, err := g.listenIn(svc)
		if err != nil {
			g.close()
			return fmt.Errorf("the host service %s in the gateway's network namespace: %w", svc, err)
		}
		go g.forward(l, func() (net.Conn, error) { return net.DialTimeout("tcp4", svc, 10*time.Second) })
	}
	if r.egress != nil {
		l, err := g.listenIn(EgressProxyAddr)
		if err != nil {
			g.close()
			return fmt.Errorf("the egress proxy in the gateway's network namespace: %w", err)
		}
		go func() { _ = r.egress.Serve(l) }()
	}
	p.setNet(g)
	return nil
}

// listenIn listens at addr inside g's namespace, closed with g, for at most maxAgentConns
// connections at a time.
func (g *gatewayNet) listenIn(addr string) (net.Listener, error) {
	var l net.Listener
	if err := inNetNS(g.ns, func() (err error) { l, err = net.Listen("tcp4", addr); return err }); err != nil {
		return nil, err
	}
	g.ls = append(g.ls, l)
	return netutil.LimitListener(l, maxAgentConns), nil
}

// dialIn connects to addr from inside the namespace ns.
func dialIn(ns *os.File, addr string) (net.Conn, error) {
	var c net.Conn
	err := inNetNS(ns, func() (err error) {
		c, err = net.DialTimeout("tcp4", addr, 10*time.Second)
		return err
	})
	return c, err
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

// setupNetns turns network namespaces per gateway on when this host lets the manager make and
// enter them (as root), and says at start whether it does.
func (r *Runtime) setupNetns() {
	switch {
	case !r.sbx.root:
		r.noNetns = "the manager is not root: it cannot enter the network namespaces of its agents' sandboxes"
	case !r.sbx.netns:
		r.noNetns = "bwrap cannot make a network namespace on this host (--unshare-net refused)"
	default:
		r.netns = true
		if slices.Contains(r.opts.HostServices, EgressProxyAddr) {
			r.opts.Log.Info("no egress proxy: a host service takes its address", "address", EgressProxyAddr)
		} else {
			r.egress = &http.Server{Handler: newEgressProxy(r.opts.Egress), ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 90 * time.Second}
		}
		r.opts.Log.Info("each gateway runs in a network namespace of its own", "hostServices", r.opts.HostServices, "egressProxy", r.egress != nil)
		return
	}
	r.opts.Log.Info("agents share the host's network namespace", "why", r.noNetns)
}

// Networks reports whether each gateway has a network namespace of its own and, when not, why.
func (r *Runtime) Networks() (bool, string) { return r.netns, r.noNetns }
