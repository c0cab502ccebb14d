package local

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// The way out of a gateway's network namespace (netns.go): an HTTP proxy the manager
// serves inside each namespace at EgressProxyAddr, named in the gateway's and its commands'
// environment (HTTPS_PROXY, HTTP_PROXY, NODE_USE_ENV_PROXY: the engine's channels, Node's
// fetch, curl). It connects to public addresses only: not to the host's loopback, private,
// link-local or shared ranges, nor to any address of this host, unless Options.Egress opens
// one. A program that ignores the proxy has no route out at all.

// EgressProxyAddr is where the egress proxy listens inside every gateway's network namespace.
const EgressProxyAddr = "127.0.0.1:3128"

// EgressRule opens a destination that the egress proxy refuses by default (a private range of
// the operator's network, a service of this host): Prefix, on Port only when not 0.
type EgressRule struct {
	Prefix netip.Prefix
	Port   int
}

// ErrEgressRefused: the destination is not one an agent may reach.
var ErrEgressRefused = errors.New("agents may not connect there")

// egressProxy is the proxy's handler, shared by every namespace's listener.
type egressProxy struct {
	rules []EgressRule
	fwd   *httputil.ReverseProxy
}

func newEgressProxy(rules []EgressRule) *egressProxy {
	e := &egressProxy{rules: rules}
	tr := &http.Transport{DialContext: e.dial, ResponseHeaderTimeout: time.Minute, MaxIdleConnsPerHost: 4, IdleConnTimeout: 30 * time.Second}
	e.fwd = &httputil.ReverseProxy{
		Rewrite:   func(r *httputil.ProxyRequest) { r.Out.URL = r.In.URL; r.Out.Host = r.In.Host },
		Transport: tr,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			http.Error(w, err.Error(), egressStatus(err))
		},
	}
	return e
}

// interfaceAddrs are the addresses of this host's interfaces.
func interfaceAddrs() []netip.Addr {
	addrs, _ := net.InterfaceAddrs()
	var out []netip.Addr
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, p.Addr().Unmap())
		}
	}
	return out
}

func egressStatus(err error) int {
	if errors.Is(err, ErrEgressRefused) {
		return http.StatusForbidden
	}
	return http.StatusBadGateway
}

// ServeHTTP tunnels a CONNECT and forwards a plain request with an absolute URL.
func (e *egressProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodConnect {
		if !r.URL.IsAbs() || r.URL.Scheme != "http" {
			http.Error(w, "this is a proxy: an absolute http URL or CONNECT", http.StatusBadRequest)
			return
		}
		e.fwd.ServeHTTP(w, r)
		return
	}
	out, err := e.dial(r.Context(), "tcp", r.Host)
	if err != nil {
		http.Error(w, err.Error(), egressStatus(err))
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		out.Close()
		http.Error(w, "no tunnel on this connection", http.StatusInternalServerError)
		return
	}
	in, buf, err := hj.Hijack()
	if err != nil {
		out.Close()
		return
	}
	defer in.Close()
	defer out.Close()
	if _, err := in.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		return
	}
	if n := buf.Reader.Buffered(); n > 0 { // what the client sent after its CONNECT
		b, _ := buf.Reader.Peek(n)
		if _, err := out.Write(b); err != nil {
			return
		}
	}
	join(in, out)
}

// dial connects to hostport at the first of its addresses that an agent may reach.
func (e *egressProxy) dial(ctx context.Context, _, hostport string) (net.Conn, error) {
	host, portStr, err := net.SplitHostPort(hostport)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrEgressRefused, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port <= 0 || port > 65535 {
		return nil, fmt.Errorf("%w: bad port %q", ErrEgressRefused, portStr)
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return nil, err
		}
		addrs = ips
	}
	own := interfaceAddrs() // read at each dial: interfaces come and go
	lastErr := fmt.Errorf("%w: %s", ErrEgressRefused, hostport)
	for _, a := range addrs {
		if !e.allowed(a.Unmap(), port, own) {
			continue
		}
		d := net.Dialer{Timeout: 30 * time.Second}
		c, err := d.DialContext(ctx, "tcp", netip.AddrPortFrom(a, uint16(port)).String())
		if err == nil {
			return c, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

// shared is the carrier-grade NAT range (RFC 6598), which net/netip does not call private.
var shared = netip.MustParsePrefix("100.64.0.0/10")

// allowed: an agent may connect to a on port: an address of the public internet that is not
// one of this host's (own), or one a rule opens.
func (e *egressProxy) allowed(a netip.Addr, port int, own []netip.Addr) bool {
	for _, r := range e.rules {
		if r.Prefix.Contains(a) && (r.Port == 0 || r.Port == port) {
			return true
		}
	}
	if !a.IsGlobalUnicast() || a.IsPrivate() || shared.Contains(a) {
		return false
	}
	for _, o := range own {
		if o == a {
			return false
		}
	}
	return true
}

// egressEnv is the environment of a gateway's and its commands' way out: the platform's
// (Options.GatewayEnv: the channel relays), the CAs they trust besides Node's own
// (Options.CAFile) and the egress proxy (none without network namespaces). NO_PROXY keeps the
// loopback direct: the gateway itself, the model proxy and the relays are there.
func (r *Runtime) egressEnv() map[string]string {
	env := maps.Clone(r.gatewayEnv)
	if env == nil {
		env = map[string]string{}
	}
	if r.opts.CAFile != "" {
		env["NODE_EXTRA_CA_CERTS"] = r.opts.CAFile
	}
	if !r.netns {
		return env
	}
	u := "http://" + EgressProxyAddr
	maps.Copy(env, map[string]string{
		"HTTPS_PROXY": u, "HTTP_PROXY": u, "https_proxy": u, "http_proxy": u,
		"NO_PROXY": "localhost,127.0.0.1,::1", "no_proxy": "localhost,127.0.0.1,::1",
		"NODE_USE_ENV_PROXY": "1",
	})
	return env
}

// setupCAFile checks Options.CAFile (an absolute path to a readable, regular file) and shows
// it read-only in every sandbox when the system dirs the sandboxes show do not hold it.
func (r *Runtime) setupCAFile() error {
	f := r.opts.CAFile
	if f == "" {
		return nil
	}
	if !filepath.IsAbs(f) {
		return fmt.Errorf("the agents' CA file %q is not an absolute path", f)
	}
	f = filepath.Clean(f)
	info, err := os.Stat(f)
	if err != nil {
		return fmt.Errorf("the agents' CA file: %w", err)
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("the agents' CA file %s is not a regular file", f)
	}
	r.opts.CAFile = f
	if !within(f, "/etc") && !within(f, "/usr") {
		r.opts.ReadOnlyPaths = append(r.opts.ReadOnlyPaths, f)
	}
	return nil
}
