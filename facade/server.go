// Package facade is the REST facade: it turns /v0 (agent management) and /v3 (files and
// signatures) calls into operations on agentplane's custom resources, and answers with the
// statuses and exact error strings of the interface contract.
package facade

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentplane/agentplane/internal/ops"
	"github.com/agentplane/agentplane/internal/rules/auth"
)

// Default limits.
const (
	DefaultMaxBodyBytes   = 1 << 20   // JSON bodies
	DefaultMaxUploadBytes = 100 << 20 // /v3/files uploads (the pinata SDK switches to resumable uploads above 90 MiB)
)

// Options are the facade's dependencies and settings.
type Options struct {
	// Deps are what the operations use (clients, informers, clock, admission, runtime,
	// engine, sealer, file store, timeouts): the facade hands them to internal/ops.
	ops.Deps

	// Signer verifies bearer JWTs.
	Signer *auth.Signer
	// Log receives the access log and errors.
	Log logr.Logger
	// Registry receives the request metrics (the manager's registry).
	Registry prometheus.Registerer
	// MaxBodyBytes bounds JSON request bodies (413 beyond).
	MaxBodyBytes int64
	// MaxUploadBytes bounds file uploads (413 beyond).
	MaxUploadBytes int64

	// ModelProxy, when set, serves agents' model-provider calls under /llm/ (it
	// authenticates agents itself: their proxy credentials are not REST tokens).
	ModelProxy http.Handler
	// ChannelRelay, when set, serves agents' channel API calls under /relay/ (the relay token
	// is in the path; refused calls spend the caller's address bucket).
	ChannelRelay http.Handler
	// Logs bounds the followers of agents' gateway logs (DefaultLogOptions).
	Logs LogOptions
	// RateLimits bound each client address and each credential (zero: the defaults).
	RateLimits RateLimitOptions
	// CredentialRecheck is how often a stream (logs, fleet, chat) checks its caller's
	// credential again: one revoked, expired or stripped of its scope or role meanwhile ends the
	// stream (0: DefaultCredentialRecheck).
	CredentialRecheck time.Duration
}

// DefaultCredentialRecheck is how often a stream checks its caller's credential again.
const DefaultCredentialRecheck = 5 * time.Second

// recheckCredential authenticates a stream's request again every CredentialRecheck until ctx
// ends, and ends the stream (cancel) once its credential is refused. A check that fails for
// another reason (kube-apiserver unavailable: a 5xx) keeps the stream: the next one decides.
func (s *Server) recheckCredential(ctx context.Context, cancel context.CancelFunc, r *http.Request, a access) {
	t := time.NewTicker(s.opts.CredentialRecheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_, err := s.authenticate(r, a)
			if err == nil {
				continue
			}
			if e := httpError(err); e.Status < 500 && ctx.Err() == nil {
				logr.FromContextOrDiscard(ctx).Info("stream ended: its credential was refused", "path", r.URL.Path, "status", e.Status, "error", e.Message)
				cancel()
				return
			}
		}
	}
}

// Server is the REST facade. It is an http.Handler.
type Server struct {
	opts    Options
	log     logr.Logger
	mux     *http.ServeMux
	metrics *metrics
	handler http.Handler
	// registered are the routes in registration order (see Routes).
	registered []RouteInfo
	// ops are the operations the handlers call.
	ops *ops.Ops
	// followers counts the log streams being served.
	followers atomic.Int64
	// limits are the per-address and per-credential rate limits.
	limits rateLimits
}

// New builds the facade and registers every route.
func New(opts Options) *Server {
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.MaxUploadBytes <= 0 {
		opts.MaxUploadBytes = DefaultMaxUploadBytes
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.CredentialRecheck <= 0 {
		opts.CredentialRecheck = DefaultCredentialRecheck
	}
	opts.Logs.setDefaults()
	s := &Server{
		opts: opts, log: opts.Log.WithName("facade"), mux: http.NewServeMux(), metrics: newMetrics(opts.Registry),
		limits: newRateLimits(opts.RateLimits),
	}
	deps := opts.Deps
	deps.Log = s.log
	s.ops = ops.New(deps)
	s.routes()
	if opts.ModelProxy != nil {
		s.mux.Handle("/llm/", s.limitModelProxy(opts.ModelProxy))
	}
	if opts.ChannelRelay != nil {
		s.mux.Handle("/relay/", s.limitRefused(opts.ChannelRelay))
	}
	s.handler = s.observe()
	return s
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// Handler answers one route. It returns a response or an error; the server writes both.
type Handler func(r *http.Request, c *Caller) (*Response, error)

// access is what a route requires of its caller.
type access struct {
	// scope the token must carry ("" for none).
	scope string
	// perm is what the caller's role must allow.
	perm auth.Permission
	// public routes need no token at all.
	public bool
	// gateway routes also accept the agent's gateway token (for that agent only).
	gateway bool
	// maxBody overrides the JSON body limit (uploads).
	maxBody int64
	// wakes: the route needs the agent's gateway or home, so a sleeping agent is woken first
	// and the request counts as the agent's activity (idle policy).
	wakes bool
}

// handle registers a route. Authentication, the body limit and error mapping happen here,
// identically for every route.
func (s *Server) handle(pattern string, a access, h Handler) {
	s.registered = append(s.registered, routeInfo(pattern, a))
	s.mux.Handle(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		limit := s.opts.MaxBodyBytes
		if a.maxBody > 0 {
			limit = a.maxBody
		}
		r.Body = http.MaxBytesReader(w, r.Body, limit)
		caller, wait, err := s.admit(r, a)
		if wait > 0 {
			s.tooManyRequests(w, r, wait)
			return
		}
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		r = r.WithContext(ctx)
		var resp *Response
		if err == nil && a.wakes {
			err = s.awaken(r, caller)
		}
		if err == nil {
			resp, err = h(r, caller)
		}
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		if resp.Stream != nil {
			if !a.public {
				go s.recheckCredential(ctx, cancel, r, a)
			}
			resp.Stream(w)
			return
		}
		writeJSON(w, resp.Status, resp.Body)
	}))
}

// writeError logs server-side failures with their cause and writes the error envelope.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	e := httpError(err)
	log := logr.FromContextOrDiscard(r.Context())
	switch {
	case e.Status >= 500:
		log.Error(err, "request failed", "path", r.URL.Path, "status", e.Status)
	case e.Cause != nil:
		// Why a request was refused (which holder a 409 met, ...), for whoever debugs it.
		log.V(1).Info("request refused", "path", r.URL.Path, "status", e.Status, "cause", e.Cause.Error())
	}
	writeJSON(w, e.Status, errorBody(r.URL.Path, e))
}

// unmatched answers paths and methods that no route takes, in the JSON envelope of the
// path's API family (the mux would answer in plain text).
func (s *Server) unmatched(w http.ResponseWriter, r *http.Request, h http.Handler) {
	probe := &headerProbe{header: http.Header{}}
	h.ServeHTTP(probe, r)
	status := probe.status
	msg := msgNotFound
	if status == http.StatusMethodNotAllowed {
		msg = msgMethodNotAllowed
		if allow := probe.header.Get("Allow"); allow != "" {
			w.Header().Set("Allow", allow)
		}
	} else {
		status = http.StatusNotFound
	}
	writeJSON(w, status, errorBody(r.URL.Path, errorf(status, msg)))
}

// headerProbe captures the status and headers the mux's fallback handlers would write.
type headerProbe struct {
	header http.Header
	status int
}

func (p *headerProbe) Header() http.Header         { return p.header }
func (p *headerProbe) Write(b []byte) (int, error) { return len(b), nil }
func (p *headerProbe) WriteHeader(code int)        { p.status = code }

// Serve runs the facade on addr until ctx ends, then drains in-flight requests.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          nil,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return err
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Runnable adapts the facade to a controller-runtime manager (it runs on every replica, not
// only the leader).
type Runnable struct {
	Server *Server
	Addr   string
	// Listener, when set, is already bound (Addr is then unused).
	Listener net.Listener
	// Ready, when set, receives the bound address once listening.
	Ready func(addr string)
}

// Start listens on Addr and serves until ctx ends.
func (r *Runnable) Start(ctx context.Context) error {
	l := r.Listener
	if l == nil {
		var err error
		if l, err = net.Listen("tcp", r.Addr); err != nil {
			return err
		}
	}
	if r.Ready != nil {
		r.Ready(l.Addr().String())
	}
	r.Server.log.Info("REST facade listening", "addr", l.Addr().String())
	return r.Server.Serve(ctx, l)
}

// NeedLeaderElection: every replica serves the facade.
func (r *Runnable) NeedLeaderElection() bool { return false }
