package facade

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"regexp"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
)

const (
	headerRequestID = "X-Request-Id"
	hstsValue       = "max-age=31536000; includeSubDomains"
)

var validRequestID = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)

// requestID echoes a well-formed incoming X-Request-Id, or makes a new one.
func requestID(r *http.Request) string {
	if id := r.Header.Get(headerRequestID); validRequestID.MatchString(id) {
		return id
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// metrics are the facade's Prometheus series, by route pattern (never by raw path).
type metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentplane_http_requests_total",
			Help: "REST facade requests by route pattern, method and status code.",
		}, []string{"route", "method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "agentplane_http_request_duration_seconds",
			Help:    "REST facade request latency by route pattern and method.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"route", "method"}),
	}
	if reg != nil {
		m.requests = register(reg, m.requests)
		m.latency = register(reg, m.latency)
	}
	return m
}

// register registers c, reusing an identical collector already registered (two facades in
// one process, as in tests, share the series).
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		if are := (prometheus.AlreadyRegisteredError{}); errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
	}
	return c
}

// statusWriter remembers what was written, for the access log and metrics.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection's writer (Flush for streamed
// answers: logs, the model proxy's server-sent events).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += n
	return n, err
}

// observe wraps every request: request id, security headers, body limit, panic recovery
// into a JSON 500, one structured access-log line and the metrics.
func (s *Server) observe() http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := requestID(r)
		h := rw.Header()
		h.Set(headerRequestID, id)
		h.Set("Strict-Transport-Security", hstsValue)
		h.Set("X-Content-Type-Options", "nosniff")
		w := &statusWriter{ResponseWriter: rw}
		log := s.log.WithValues("requestId", id)
		handler, route := s.mux.Handler(r)
		if route == "" {
			route = "unmatched"
		}
		defer func() {
			if p := recover(); p != nil {
				log.Error(nil, "panic while serving", "panic", p, "path", r.URL.Path)
				if w.status == 0 {
					writeJSON(w, http.StatusInternalServerError, errorBody(r.URL.Path, errorf(http.StatusInternalServerError, msgInternal)))
				}
			}
			elapsed := time.Since(start)
			s.metrics.requests.WithLabelValues(route, r.Method, strconv.Itoa(w.status)).Inc()
			s.metrics.latency.WithLabelValues(route, r.Method).Observe(elapsed.Seconds())
			log.Info("request", "method", r.Method, "route", route, "status", w.status,
				"bytes", w.bytes, "durationMs", elapsed.Milliseconds(), "remote", r.RemoteAddr)
		}()
		r = r.WithContext(logr.NewContext(r.Context(), log))
		if route == "unmatched" {
			s.unmatched(w, r, handler)
			return
		}
		// The mux (not the handler it found) serves, so that it sets the path values.
		s.mux.ServeHTTP(w, r)
	})
}
