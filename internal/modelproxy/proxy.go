// Package modelproxy is the model credential proxy: agents call their model providers
// through it with a per-agent credential; it authenticates the agent, swaps the credential
// for the real provider key, relays the answer unbuffered, counts usage and enforces budgets.
//
// Routes are /llm/{provider}/{rest...}: the upstream URL is the provider's origin + /{rest}
// + the query string. Usage is kept in memory until the integrator drains it to persistent
// status (Drain, then Acknowledge or Restore).
package modelproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"
)

// Grant is what an authorized credential may do.
type Grant struct {
	Agent, Workspace string // ids used as map keys and in messages (agent "ns/name", workspace "ns")
	Key              []byte // the real provider key
	AgentBudget      Budget
	WorkspaceBudget  Budget
	// Tokens already counted today (UTC day Day, "2006-01-02") by every replica, as persisted;
	// the proxy adds what it has not flushed (or has drained and not seen acknowledged) yet.
	Day                          string
	AgentTokens, WorkspaceTokens int64
}

// ErrUnauthorized is what an Authorizer returns for an unknown, revoked or foreign
// credential: the proxy answers 401. Any other error answers 503.
var ErrUnauthorized = errors.New("modelproxy: unauthorized credential")

// Authorizer maps an agent's credential for a provider to its grant.
type Authorizer interface {
	Authorize(ctx context.Context, provider, credential string) (Grant, error)
}

// Options configure a Proxy.
type Options struct {
	Authorizer Authorizer
	Upstreams  map[string]string     // provider -> origin override (tests, air-gapped mirrors)
	Transport  http.RoundTripper     // default: a tuned clone of http.DefaultTransport
	Clock      clock.PassiveClock    // default real
	Log        logr.Logger           // requests at V(1): provider, agent, status, bytes, duration
	Registerer prometheus.Registerer // nil: no metrics
}

// route is a provider with its resolved origin and pre-bound metrics.
type route struct {
	Provider
	origin  *url.URL
	latency prometheus.Observer
	in, out prometheus.Counter
}

// Proxy is the model credential proxy, an http.Handler mounted at "/llm/".
type Proxy struct {
	auth      Authorizer
	routes    map[string]*route
	transport http.RoundTripper
	clock     clock.PassiveClock
	log       logr.Logger
	m         *metrics
	ledger    *ledger
	rp        *httputil.ReverseProxy
}

// New returns a Proxy.
func New(o Options) (*Proxy, error) {
	if o.Authorizer == nil {
		return nil, errors.New("modelproxy: Authorizer is required")
	}
	p := &Proxy{auth: o.Authorizer, routes: map[string]*route{}, transport: o.Transport, clock: o.Clock,
		log: o.Log, ledger: newLedger()}
	if p.clock == nil {
		p.clock = clock.RealClock{}
	}
	if p.log.GetSink() == nil {
		p.log = logr.Discard()
	}
	if p.transport == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConns = 1024
		t.MaxIdleConnsPerHost = 256
		t.IdleConnTimeout = 90 * time.Second
		p.transport = t
	}
	var err error
	if p.m, err = newMetrics(o.Registerer); err != nil {
		return nil, err
	}
	for name := range o.Upstreams {
		if _, ok := Lookup(name); !ok {
			return nil, fmt.Errorf("modelproxy: upstream override for unknown provider %q", name)
		}
	}
	for _, pv := range Providers() {
		raw := pv.Upstream
		if v, ok := o.Upstreams[pv.Name]; ok {
			raw = v
		}
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("modelproxy: provider %s: bad upstream origin %q", pv.Name, raw)
		}
		p.routes[pv.Name] = &route{Provider: pv, origin: u,
			latency: p.m.latency.WithLabelValues(pv.Name),
			in:      p.m.tokens.WithLabelValues(pv.Name, "input"),
			out:     p.m.tokens.WithLabelValues(pv.Name, "output")}
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite:        p.rewrite,
		ModifyResponse: p.modifyResponse,
		ErrorHandler:   p.errorHandler,
		Transport:      p.transport,
		FlushInterval:  -1,
		BufferPool:     bufferPool{},
	}
	return p, nil
}

// exchange is one request's state, carried in its context.
type exchange struct {
	route   *route
	grant   Grant
	rest    string // escaped, "" or starting with "/"
	day     string // UTC day the request was admitted on
	forward time.Time
	code    int
	bytes   int64
}

type exchangeKey struct{}

func exchangeOf(ctx context.Context) *exchange { return ctx.Value(exchangeKey{}).(*exchange) }

// ServeHTTP serves /llm/{provider}/{rest...}.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := p.clock.Now()
	path := r.URL.EscapedPath()
	i := strings.Index(path, "/llm/")
	if i < 0 {
		Provider{}.writeError(w, http.StatusNotFound, errNotFound, "agentplane: not a model provider route")
		return
	}
	name, rest, _ := strings.Cut(path[i+len("/llm/"):], "/")
	rt := p.routes[name]
	if rt == nil {
		Provider{}.writeError(w, http.StatusNotFound, errNotFound, fmt.Sprintf("agentplane: unknown model provider %q", name))
		p.m.requests.WithLabelValues("unknown", "404").Inc()
		return
	}
	if rest != "" || strings.HasSuffix(path, "/"+name+"/") {
		rest = "/" + rest
	}
	ex := &exchange{route: rt, rest: rest}
	defer p.done(ex, start)

	cred := rt.credential(r)
	if cred == "" {
		ex.code = http.StatusUnauthorized
		rt.writeError(w, ex.code, errUnauthorized, "agentplane: missing credential")
		return
	}
	g, err := p.auth.Authorize(r.Context(), name, cred)
	switch {
	case r.Context().Err() != nil:
		ex.code = 499
		return
	case errors.Is(err, ErrUnauthorized):
		ex.code = http.StatusUnauthorized
		rt.writeError(w, ex.code, errUnauthorized, "agentplane: invalid credential")
		return
	case err != nil:
		ex.code = http.StatusServiceUnavailable
		p.log.Error(err, "model proxy: authorizer failed", "provider", name)
		rt.writeError(w, ex.code, errUnavailable, "agentplane: credential check unavailable, retry later")
		return
	}
	ex.grant = g
	now := p.clock.Now()
	ex.day = day(now)
	if ref := p.ledger.admit(&g, now); ref != nil {
		p.m.refusals.WithLabelValues(ref.scope, ref.kind).Inc()
		ex.code = http.StatusTooManyRequests
		secs := int64((ref.retryAfter + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.FormatInt(max(secs, 1), 10))
		rt.writeError(w, ex.code, errRateLimit, ref.Error())
		return
	}
	ex.forward = p.clock.Now()
	p.rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), exchangeKey{}, ex)))
}

// done counts and logs a request; it runs deferred, also when the relay aborts.
func (p *Proxy) done(ex *exchange, start time.Time) {
	code := ex.code
	if code == 0 {
		code = 499
	}
	p.m.requests.WithLabelValues(ex.route.Name, strconv.Itoa(code)).Inc()
	if v := p.log.V(1); v.Enabled() {
		v.Info("model request", "provider", ex.route.Name, "agent", ex.grant.Agent, "status", code,
			"bytes", ex.bytes, "duration", p.clock.Since(start).String())
	}
}

func (p *Proxy) rewrite(pr *httputil.ProxyRequest) {
	ex := exchangeOf(pr.In.Context())
	pr.Out.URL = upstreamURL(ex.route.origin, ex.rest, pr.In.URL.RawQuery)
	pr.Out.Host = ""
	ex.route.inject(pr.Out, string(ex.grant.Key))
	// Usage is read from the relayed body: the client's Accept-Encoding goes, so the
	// transport negotiates gzip itself and hands over plain text (and so does the relay).
	pr.Out.Header.Del("Accept-Encoding")
	pr.Out.Header.Del("Cookie")
	if pr.Out.Body != nil && pr.Out.ContentLength > 0 {
		pr.Out.Body = &sizedBody{rc: pr.Out.Body, left: pr.Out.ContentLength}
	}
}

// sizedBody ends the relayed request body at its Content-Length by itself. The transport
// reads once more after the last byte to see EOF; by then the provider may have answered,
// and Go's HTTP/1 server drains and closes the request body when the answer's header is
// written: that read failed ("invalid Read on closed Body"), and the transport closed the
// provider connection under the streaming answer (replies cut off mid-body under load).
type sizedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *sizedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	if b.left <= 0 && err == nil {
		err = io.EOF
	}
	return n, err
}

func (b *sizedBody) Close() error { return b.rc.Close() }

func (p *Proxy) modifyResponse(res *http.Response) error {
	ex := exchangeOf(res.Request.Context())
	rt := ex.route
	rt.latency.Observe(p.clock.Since(ex.forward).Seconds())
	ex.code = res.StatusCode
	p.m.streams.Inc()
	res.Body = &meteredBody{rc: res.Body, scan: newUsageScanner(rt.Provider, res.Header.Get("Content-Type")),
		done: func(n, in, out int64) {
			p.m.streams.Dec()
			ex.bytes = n
			if in > 0 {
				rt.in.Add(float64(in))
			}
			if out > 0 {
				rt.out.Add(float64(out))
			}
			p.ledger.spend(ex.grant.Agent, ex.grant.Workspace, ex.day, in, out)
		}}
	return nil
}

func (p *Proxy) errorHandler(w http.ResponseWriter, r *http.Request, err error) {
	ex := exchangeOf(r.Context())
	if r.Context().Err() != nil {
		ex.code = 499 // the client left: nobody to answer
		return
	}
	ex.code = http.StatusBadGateway
	p.log.V(1).Info("model provider unreachable", "provider", ex.route.Name, "agent", ex.grant.Agent, "error", err.Error())
	ex.route.writeError(w, ex.code, errBadGateway, fmt.Sprintf("agentplane: model provider %s unreachable", ex.route.Name))
}

// Drain hands the usage counted since the last Drain (one Delta per agent and day) and
// forgets it as pending. Budgets keep counting a drained delta (on top of the grant's
// persisted count) until the integrator either Acknowledges it (persisted) or Restores it
// (the write failed; it is pending again and comes back with the next Drain).
func (p *Proxy) Drain() []Delta { return p.ledger.drain(p.clock.Now()) }

// Restore puts back deltas a failed flush could not write.
func (p *Proxy) Restore(ds []Delta) { p.ledger.restore(ds) }

// Acknowledge tells the proxy a drained delta is persisted and what the persisted totals of
// its day became (agentTotal for d.Agent, workspaceTotal for d.Workspace; 0 when unknown).
// The proxy stops counting the delta itself and counts at least those totals as persisted
// for the day, so a grant read from a cache that has not seen the write yet opens no gap.
func (p *Proxy) Acknowledge(d Delta, agentTotal, workspaceTotal int64) {
	p.ledger.acknowledge(d, agentTotal, workspaceTotal)
}

// CloseIdleConnections closes the transport's idle upstream connections.
func (p *Proxy) CloseIdleConnections() {
	if c, ok := p.transport.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// bufferPool recycles the relay's copy buffers.
type bufferPool struct{}

var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func (bufferPool) Get() []byte  { return *(copyBufs.Get().(*[]byte)) }
func (bufferPool) Put(b []byte) { copyBufs.Put(&b) }
