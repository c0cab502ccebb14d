package dnsverify

import (
	"context"
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentplane/agentplane/internal/promreg"
)

// Lookup results counted by Instrument.
const (
	// LookupOK: the name has TXT records (whether they hold the token is another matter).
	LookupOK = "ok"
	// LookupNotFound: no TXT record (yet): NXDOMAIN or NODATA.
	LookupNotFound = "not_found"
	// LookupError: no nameserver answered (timeout, refused, SERVFAIL).
	LookupError = "error"
)

// Instrument wraps r so that every look-up counts into agentplane_dns_lookups_total{result}
// on reg.
func Instrument(r Resolver, reg prometheus.Registerer) Resolver {
	lookups := promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentplane_dns_lookups_total",
		Help: "TXT look-ups of domain ownership checks by result (ok; not_found: no record yet; error: DNS unavailable).",
	}, []string{"result"}))
	return &instrumented{Resolver: r, lookups: lookups}
}

type instrumented struct {
	Resolver
	lookups *prometheus.CounterVec
}

func (i *instrumented) LookupTXT(ctx context.Context, name string) ([]string, error) {
	values, err := i.Resolver.LookupTXT(ctx, name)
	result := LookupOK
	switch {
	case err == nil:
	case errors.Is(err, ErrNotFound):
		result = LookupNotFound
	case ctx.Err() != nil:
		return values, err // the caller gave up (shutdown): nothing is known about DNS
	default:
		result = LookupError
	}
	i.lookups.WithLabelValues(result).Inc()
	return values, err
}
