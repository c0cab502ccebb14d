package facade

import (
	"math"
	"net"
	"net/http"
	"strconv"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/utils/lru"
)

// msgTooManyRequests answers a request over a rate limit (429).
const msgTooManyRequests = "Too many requests"

// Default rate limits: generous enough that a busy client (a console, an SDK, the test suites
// and benchmarks of this repository) never meets them, tight enough that one client cannot
// make the facade do unbounded work.
var (
	DefaultRateLimitPerToken   = RateLimit{PerSecond: 200, Burst: 400}
	DefaultRateLimitPerAddress = RateLimit{PerSecond: 500, Burst: 1000}
)

// RateLimit is a token bucket: PerSecond requests sustained, Burst at once (0: twice
// PerSecond). PerSecond 0 takes the default, a negative PerSecond turns the limit off.
type RateLimit struct {
	PerSecond float64
	Burst     int
}

// RateLimitOptions bound the requests of each caller. Over a limit the facade answers 429
// with Retry-After.
type RateLimitOptions struct {
	// PerAddress bounds the requests of one client address (the connection's peer) that do
	// not authenticate: without a credential (counted before anything is looked at) or with
	// one that is refused (counted once it is). A request that authenticates counts against
	// its credential's limit only, so the callers that share an address (every local agent,
	// and the operator, on 127.0.0.1) do not share one bucket. Requests to the model proxy
	// (/llm/) that it refuses as unauthorized count here too.
	PerAddress RateLimit
	// PerToken bounds the requests of one credential, once it has authenticated.
	PerToken RateLimit
}

// NoRateLimits turns both limits off (benchmarks and suites that measure or probe the
// handlers, not the limits).
var NoRateLimits = RateLimitOptions{PerAddress: RateLimit{PerSecond: -1}, PerToken: RateLimit{PerSecond: -1}}

// limiterMaxItems bounds each limiter's table: past it the bucket used least recently goes
// (one unused for as long as a full table's worth of other keys has refilled anyway), never
// the whole table, so flooding it with new keys resets no caller that is still active.
var limiterMaxItems = 100000

// keyedLimiter is one token bucket per key (nil: no limit), in a table of at most
// limiterMaxItems keys that evicts the least recently used.
type keyedLimiter struct {
	limit   rate.Limit
	burst   int
	buckets *lru.Cache // key -> *rate.Limiter
}

func newKeyedLimiter(l, def RateLimit) *keyedLimiter {
	if l.PerSecond == 0 {
		l = def
	}
	if l.PerSecond < 0 {
		return nil
	}
	burst := l.Burst
	if burst <= 0 {
		burst = int(math.Max(1, math.Ceil(2*l.PerSecond)))
	}
	return &keyedLimiter{limit: rate.Limit(l.PerSecond), burst: burst, buckets: lru.New(limiterMaxItems)}
}

// bucket is key's token bucket, made full when the table holds none for it.
func (k *keyedLimiter) bucket(key string) *rate.Limiter {
	if b, ok := k.buckets.Get(key); ok {
		return b.(*rate.Limiter)
	}
	b := rate.NewLimiter(k.limit, k.burst)
	k.buckets.Add(key, b)
	return b
}

// delay takes one request from key's bucket: 0 when it may go now, else how long until it
// could (the request is then not counted).
func (k *keyedLimiter) delay(key string, now time.Time) time.Duration {
	if k == nil {
		return 0
	}
	r := k.bucket(key).ReserveN(now, 1)
	if !r.OK() {
		return time.Second
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return d
	}
	return 0
}

// rateLimits are the facade's limiters.
type rateLimits struct {
	address, token *keyedLimiter
}

func newRateLimits(o RateLimitOptions) rateLimits {
	return rateLimits{
		address: newKeyedLimiter(o.PerAddress, DefaultRateLimitPerAddress),
		token:   newKeyedLimiter(o.PerToken, DefaultRateLimitPerToken),
	}
}

// clientAddress is the peer's IP (the port varies by connection).
func clientAddress(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

// credentialKey names the credential a caller authenticated with. An agent's gateway token
// and all its platform tokens share one bucket: minting more tokens buys no more requests.
func credentialKey(c *Caller) string {
	if c.GatewayAgent != "" {
		return "agent/" + c.Namespace + "/" + c.GatewayAgent
	}
	return "key/" + c.Namespace + "/" + c.KeyID
}

// admit applies the rate limits around authentication: a request without a credential
// spends its address's bucket before anything is looked at; one with a credential is
// authenticated (its signature checked, its object read from the cache) and then spends its
// credential's bucket, or, refused (401 or 403), its address's (a 429 then once the address
// is over).
func (s *Server) admit(r *http.Request, a access) (*Caller, time.Duration, error) {
	if a.public {
		c, err := s.authenticate(r, a)
		return c, 0, err
	}
	addr := clientAddress(r)
	if r.Header.Get("Authorization") == "" {
		if wait := s.limits.address.delay(addr, time.Now()); wait > 0 {
			return nil, wait, nil
		}
		c, err := s.authenticate(r, a)
		return c, 0, err
	}
	c, err := s.authenticate(r, a)
	if err != nil {
		if wait := s.limits.address.delay(addr, time.Now()); wait > 0 {
			return nil, wait, nil
		}
		return nil, 0, err
	}
	if wait := s.limits.token.delay(credentialKey(c), time.Now()); wait > 0 {
		return nil, wait, nil
	}
	return c, 0, nil
}

// tooManyRequests answers 429 in the envelope of the path's API family, with Retry-After in
// whole seconds.
func (s *Server) tooManyRequests(w http.ResponseWriter, r *http.Request, wait time.Duration) {
	secs := int(math.Ceil(wait.Seconds()))
	if secs < 1 {
		secs = 1
	}
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	writeJSON(w, http.StatusTooManyRequests, errorBody(r.URL.Path, errorf(http.StatusTooManyRequests, msgTooManyRequests)))
}

// limitModelProxy puts the model proxy (/llm/) under the per-address limit of the requests it
// refuses, as the facade's routes are: a request without a credential spends the address's
// bucket first (429 past it, before the proxy looks at it); one with a credential goes to the
// proxy, which checks it against its cache, and spends the address's bucket when it is
// refused (401 or 403). The calls it admits are bounded by their agents' budgets (requests
// per minute, tokens per day), not by the address, which every local agent shares.
func (s *Server) limitModelProxy(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		addr := clientAddress(r)
		if !hasModelCredential(r) {
			if wait := s.limits.address.delay(addr, time.Now()); wait > 0 {
				w.Header().Set("Retry-After", strconv.Itoa(max(int(math.Ceil(wait.Seconds())), 1)))
				writeJSON(w, http.StatusTooManyRequests, map[string]any{"error": map[string]any{"message": "agentplane: " + msgTooManyRequests}})
				return
			}
			h.ServeHTTP(w, r)
			return
		}
		sw := &statusWriter{ResponseWriter: w}
		h.ServeHTTP(sw, r)
		if sw.status == http.StatusUnauthorized || sw.status == http.StatusForbidden {
			s.limits.address.delay(addr, time.Now())
		}
	})
}

// limitRefused puts a handler whose every call carries its credential (the channel relay's
// token is in its path) under the per-address limit as the model proxy's calls with a
// credential are: a call it refuses (401, 403 or 404) spends the address's bucket.
func (s *Server) limitRefused(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		addr := clientAddress(r)
		sw := &statusWriter{ResponseWriter: w}
		h.ServeHTTP(sw, r)
		if sw.status == http.StatusUnauthorized || sw.status == http.StatusForbidden || sw.status == http.StatusNotFound {
			s.limits.address.delay(addr, time.Now())
		}
	})
}

// hasModelCredential tells whether r carries a credential in one of the places the providers'
// clients put it (the model proxy reads the same ones).
func hasModelCredential(r *http.Request) bool {
	h := r.Header
	return h.Get("Authorization") != "" || h.Get("X-Api-Key") != "" || h.Get("X-Goog-Api-Key") != "" || r.URL.Query().Has("key")
}
