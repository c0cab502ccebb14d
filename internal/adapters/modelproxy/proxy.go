// Package modelproxy is the model credential proxy: agents call their model providers
// through it with a per-agent credential; it authenticates the agent, swaps the credential
// for the real provider key, relays the answer unbuffered, counts usage and enforces budgets.
//
// Routes are /llm/{provider}/{rest...}: only the provider's inference routes are forwarded
// (routes.go; anything else answers 403), to the provider's origin + /{rest} + the query
// string. A model call reserves what it may cost against token budgets before it is
// forwarded and settles what it did cost after (request.go, budget.go). Usage is kept in
// memory until the integrator drains it to persistent status (Drain, then Acknowledge or
// Restore).
package modelproxy

import (
	"bytes"
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
	"golang.org/x/sync/semaphore"
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
	// The day's cost already counted (millionths of the price table's currency), likewise.
	AgentCostMicros, WorkspaceCostMicros int64
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
	// Prices prices each request as it settles (nil: usage is counted in tokens only).
	Prices *Prices
	// MaxBufferedBodies bounds the request bodies held in memory at once, all requests
	// together (default DefaultMaxBufferedBodies): a request waits for room before its body
	// is read. It also bounds one body, with MaxRequestBody.
	MaxBufferedBodies int64
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
	meter     meter
	prices    *Prices
	rp        *httputil.ReverseProxy
	bodies    *semaphore.Weighted
	maxBody   int64
}

// New returns a Proxy.
func New(o Options) (*Proxy, error) {
	if o.Authorizer == nil {
		return nil, errors.New("modelproxy: Authorizer is required")
	}
	p := &Proxy{auth: o.Authorizer, routes: map[string]*route{}, transport: o.Transport, clock: o.Clock,
		log: o.Log, ledger: newLedger(), prices: o.Prices}
	if p.clock == nil {
		p.clock = clock.RealClock{}
	}
	if p.log.GetSink() == nil {
		p.log = logr.Discard()
	}
	if o.MaxBufferedBodies <= 0 {
		o.MaxBufferedBodies = DefaultMaxBufferedBodies
	}
	p.bodies, p.maxBody = semaphore.NewWeighted(o.MaxBufferedBodies), min(MaxRequestBody, o.MaxBufferedBodies-1)
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
	route    *route
	endpoint endpoint
	grant    Grant
	rest     string // decoded provider path, starting with "/"
	req      request
	res      *reservation // nil until admitted
	day      string       // UTC day the request was admitted on
	forward  time.Time
	code     int
	bytes    int64
	held     int64 // bytes of the body budget (Options.MaxBufferedBodies) held
}

type exchangeKey struct{}

func exchangeOf(ctx context.Context) *exchange { return ctx.Value(exchangeKey{}).(*exchange) }

// ServeHTTP serves /llm/{provider}/{rest...}: only the provider's inference routes
// (routes.go); every other path answers 403 and is not forwarded.
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
	ex := &exchange{route: rt}
	defer p.done(ex, start)
	defer func() { p.bodies.Release(ex.held) }()
	if !p.allowed(w, r, ex, "/"+rest) || !p.authorize(w, r, ex) || !p.readBody(w, r, ex) || !p.admit(w, ex) {
		return
	}
	// Whatever way the relay ends, the reservation is settled; normally the answer's body
	// (modifyResponse) or the error handler has settled it already and this does nothing.
	defer p.settle(ex, ex.req.input, 0)
	ex.forward = p.clock.Now()
	p.rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), exchangeKey{}, ex)))
}

// allowed finds the inference route r asks for, or answers 403.
func (p *Proxy) allowed(w http.ResponseWriter, r *http.Request, ex *exchange, rest string) bool {
	clean, ok := cleanRest(rest)
	if ok {
		ex.endpoint, ok = ex.route.endpoint(r.Method, clean)
	}
	if !ok {
		ex.code = http.StatusForbidden
		shown := rest
		if len(shown) > 200 {
			shown = shown[:200] + "..."
		}
		ex.route.writeError(w, ex.code, errForbidden, fmt.Sprintf("agentplane: %s %s is not a model inference route: "+
			"the model proxy forwards only %s's chat, messages, responses, embeddings and model list routes",
			r.Method, shown, ex.route.Name))
		return false
	}
	ex.rest = clean
	return true
}

// authorize checks the agent's credential and keeps its grant.
func (p *Proxy) authorize(w http.ResponseWriter, r *http.Request, ex *exchange) bool {
	rt := ex.route
	cred := rt.credential(r)
	if cred == "" {
		ex.code = http.StatusUnauthorized
		rt.writeError(w, ex.code, errUnauthorized, "agentplane: missing credential")
		return false
	}
	g, err := p.auth.Authorize(r.Context(), rt.Name, cred)
	switch {
	case r.Context().Err() != nil:
		ex.code = 499
		return false
	case errors.Is(err, ErrUnauthorized):
		ex.code = http.StatusUnauthorized
		rt.writeError(w, ex.code, errUnauthorized, "agentplane: invalid credential")
		return false
	case err != nil:
		ex.code = http.StatusServiceUnavailable
		p.log.Error(err, "model proxy: authorizer failed", "provider", rt.Name)
		rt.writeError(w, ex.code, errUnavailable, "agentplane: credential check unavailable, retry later")
		return false
	}
	ex.grant = g
	return true
}

// admit reserves the request's cost against its budgets, or answers 429. A request whose
// input the provider keeps (previous_response_id, conversation) is refused with 400 when a
// token or spend budget applies: its reservation could not bound its cost, and 256 of them at
// once would overshoot the budget by 256 conversations. It is refused as OpenAI refuses the
// parameter where it does not keep responses (unsupported_parameter), on which OpenClaw sends
// the turn again with its full history. Under a spend budget a model call the price table
// cannot price is refused with 403: what it costs could not be counted.
func (p *Proxy) admit(w http.ResponseWriter, ex *exchange) bool {
	ab, wb := ex.grant.AgentBudget, ex.grant.WorkspaceBudget
	spend := ab.CostMicrosPerDay > 0 || wb.CostMicrosPerDay > 0
	if f := ex.req.hiddenInput; f != "" && (ab.TokensPerDay > 0 || wb.TokensPerDay > 0 || spend) {
		ex.code = http.StatusBadRequest
		ex.route.writeParamError(w, ex.code, errUnsupported, f, fmt.Sprintf("agentplane: %s is not supported under a "+
			"token or spend budget (the input it refers to is not in the request, so its cost cannot be reserved): send the full input", f))
		return false
	}
	now := p.clock.Now()
	ex.day = day(now)
	hold := amount{tokens: ex.req.reservation()}
	if !ex.endpoint.infer || ex.endpoint.free {
		hold.tokens = 0
	}
	if hold.tokens > 0 {
		var priced bool
		hold.cost, priced = p.prices.Cost(ex.route.Name, ex.req.model, ex.req.input, ex.req.output)
		if !priced && spend {
			msg := fmt.Sprintf("agentplane: model %q has no price in the platform's model price table, and a spend budget "+
				"applies: its cost could not be counted", ex.req.model)
			p.meter.update(ex.grant.Agent, func(r *Reading) { r.Refusals++; r.LastRefusal = msg })
			scope := "workspace"
			if ab.CostMicrosPerDay > 0 {
				scope = "agent"
			}
			p.m.refusals.WithLabelValues(scope, "unpriced").Inc()
			ex.code = http.StatusForbidden
			ex.route.writeError(w, ex.code, errForbidden, msg)
			return false
		}
	}
	res, ref := p.ledger.admit(&ex.grant, now, ex.req.model, hold, p.prices.Currency())
	if ref != nil {
		p.m.refusals.WithLabelValues(ref.scope, ref.kind).Inc()
		p.meter.update(ex.grant.Agent, func(r *Reading) { r.Refusals++; r.LastRefusal = ref.Error() })
		ex.code = http.StatusTooManyRequests
		secs := int64((ref.retryAfter + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.FormatInt(max(secs, 1), 10))
		ex.route.writeError(w, ex.code, errRateLimit, ref.Error())
		return false
	}
	ex.res = res
	p.meter.update(ex.grant.Agent, func(r *Reading) { r.InFlight++ })
	return true
}

// settle replaces the request's reservation with what it cost (once; later calls do
// nothing): its tokens, and their price when the price table has the model's (a request that
// used no tokens costs nothing, priced or not).
func (p *Proxy) settle(ex *exchange, in, out int64) {
	if ex.res == nil {
		return
	}
	u := Usage{InputTokens: in, OutputTokens: out}
	if p.prices != nil && in+out > 0 {
		var priced bool
		if u.CostMicros, priced = p.prices.Cost(ex.route.Name, ex.req.model, in, out); !priced {
			u.Unpriced = 1
		}
	}
	if !p.ledger.settle(ex.res, u) {
		return
	}
	p.meter.update(ex.grant.Agent, func(r *Reading) {
		r.InFlight--
		u.Requests = 1
		r.Spent = r.Spent.Add(u)
	})
	if in > 0 {
		ex.route.in.Add(float64(in))
	}
	if out > 0 {
		ex.route.out.Add(float64(out))
	}
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
	// No protocol switch: an upgraded connection would carry model calls past the allow-list
	// and the meter (ReverseProxy puts the client's Upgrade back before Rewrite).
	pr.Out.Header.Del("Upgrade")
	pr.Out.Header.Del("Connection")
	// The body was read whole (readBody): the provider gets it with its length, as possibly
	// rewritten; a GET forwards none.
	pr.Out.TransferEncoding = nil
	if body := ex.req.body; body != nil {
		pr.Out.Body = io.NopCloser(bytes.NewReader(body))
		pr.Out.ContentLength = int64(len(body))
		pr.Out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	} else {
		pr.Out.Body, pr.Out.ContentLength, pr.Out.GetBody = nil, 0, nil
	}
}

func (p *Proxy) modifyResponse(res *http.Response) error {
	ex := exchangeOf(res.Request.Context())
	rt := ex.route
	rt.latency.Observe(p.clock.Since(ex.forward).Seconds())
	ex.code = res.StatusCode
	p.m.streams.Inc()
	res.Body = &meteredBody{rc: res.Body, scan: newUsageScanner(rt.Provider, res.Header.Get("Content-Type")),
		done: func(m metered) {
			p.m.streams.Dec()
			ex.bytes = m.bytes
			in, out := ex.charge(res.StatusCode, m)
			p.settle(ex, in, out)
		}}
	return nil
}

// charge is what an answer costs: the usage it reported. A successful model call that did
// not report its input is charged the request's estimate; a stream that ended without
// reporting its output, or was cut (the client left, the provider broke off), is charged at
// least the text it relayed (BytesPerToken); a cut JSON answer without usage, its bytes.
// Answers the provider refused (not 2xx), model lists and token counts cost what they
// report (nothing).
func (ex *exchange) charge(status int, m metered) (in, out int64) {
	in, out = m.in, m.out
	if status/100 != 2 || !ex.endpoint.infer || ex.endpoint.free {
		return in, out
	}
	if !m.inSeen {
		in = ex.req.input
	}
	switch {
	case ex.endpoint.noOutput:
	case m.sse && (!m.complete || !m.outSeen):
		out = max(out, estimateTokens(m.text))
	case !m.sse && !m.complete && !m.outSeen:
		out = estimateTokens(m.bytes)
	}
	return in, out
}

func (p *Proxy) errorHandler(w http.ResponseWriter, r *http.Request, err error) {
	ex := exchangeOf(r.Context())
	if r.Context().Err() != nil {
		// The client left before the answer: the provider may have read the prompt.
		ex.code = 499
		p.settle(ex, ex.req.input, 0)
		return
	}
	p.settle(ex, 0, 0) // no answer: it cost nothing
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
func (p *Proxy) Acknowledge(d Delta, agentTotal, workspaceTotal Totals) {
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
