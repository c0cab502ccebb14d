package apiserver

import (
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
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
	// PerAddress bounds the requests of one client address (the connection's peer), checked
	// before the token is looked at: unauthenticated requests meet it before any lookup.
	PerAddress RateLimit
	// PerToken bounds the requests of one credential, once it has authenticated.
	PerToken RateLimit
}

// NoRateLimits turns both limits off (benchmarks and suites that measure or probe the
// handlers, not the limits).
var NoRateLimits = RateLimitOptions{PerAddress: RateLimit{PerSecond: -1}, PerToken: RateLimit{PerSecond: -1}}

// Idle buckets are dropped: one idle this long has refilled, so a fresh one is the same.
const (
	limiterIdle     = time.Minute
	limiterMaxItems = 100000
)

// keyedLimiter is one token bucket per key (nil: no limit).
type keyedLimiter struct {
	limit     rate.Limit
	burst     int
	mu        sync.Mutex
	buckets   map[string]*bucket
	lastSweep time.Time
}

type bucket struct {
	lim  *rate.Limiter
	seen time.Time
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
	return &keyedLimiter{limit: rate.Limit(l.PerSecond), burst: burst, buckets: map[string]*bucket{}}
}

// delay takes one request from key's bucket: 0 when it may go now, else how long until it
// could (the request is then not counted).
func (k *keyedLimiter) delay(key string, now time.Time) time.Duration {
	if k == nil {
		return 0
	}
	k.mu.Lock()
	if now.Sub(k.lastSweep) >= limiterIdle || len(k.buckets) >= limiterMaxItems {
		k.sweep(now)
	}
	b := k.buckets[key]
	if b == nil {
		b = &bucket{lim: rate.NewLimiter(k.limit, k.burst)}
		k.buckets[key] = b
	}
	b.seen = now
	k.mu.Unlock()
	r := b.lim.ReserveN(now, 1)
	if !r.OK() {
		return time.Second
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return d
	}
	return 0
}

// sweep drops idle buckets (and, should that not suffice, all of them). k.mu is held.
func (k *keyedLimiter) sweep(now time.Time) {
	k.lastSweep = now
	for key, b := range k.buckets {
		if now.Sub(b.seen) >= limiterIdle {
			delete(k.buckets, key)
		}
	}
	if len(k.buckets) >= limiterMaxItems {
		clear(k.buckets)
	}
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

// admit applies the rate limits around authentication: per client address before the token
// is looked at, per credential once it is known. A positive wait means 429.
func (s *Server) admit(r *http.Request, a access) (*Caller, time.Duration, error) {
	if a.public {
		c, err := s.authenticate(r, a)
		return c, 0, err
	}
	if wait := s.limits.address.delay(clientAddress(r), time.Now()); wait > 0 {
		return nil, wait, nil
	}
	c, err := s.authenticate(r, a)
	if err != nil {
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
