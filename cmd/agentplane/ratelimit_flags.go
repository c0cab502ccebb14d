package main

import (
	"fmt"
	"strconv"

	"github.com/spf13/pflag"

	"github.com/agentplane/agentplane/facade"
	"github.com/agentplane/agentplane/internal/platform"
)

// addRateLimitFlags declares the REST facade's rate limits (`manager` and `dev` share them).
func addRateLimitFlags(f *pflag.FlagSet, o *platform.Options) {
	o.RateLimits.PerToken = facade.DefaultRateLimitPerToken
	o.RateLimits.PerAddress = facade.DefaultRateLimitPerAddress
	f.Var(&rateFlag{&o.RateLimits.PerToken}, "rate-limit-per-token",
		"requests per second one credential may make to the REST facade, sustained (bursts of twice as many; 0: no limit)")
	f.Var(&rateFlag{&o.RateLimits.PerAddress}, "rate-limit-per-address",
		"requests per second one client address may make to the REST facade and the model proxy without a credential or with one they refuse, sustained (bursts of twice as many; 0: no limit)")
}

// rateFlag is a requests-per-second flag where 0 turns the limit off (a negative rate in
// facade.RateLimit). Setting it makes the burst twice the rate.
type rateFlag struct{ limit *facade.RateLimit }

func (r *rateFlag) Set(s string) error {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < 0 {
		return fmt.Errorf("want a rate of requests per second >= 0, got %q", s)
	}
	if v == 0 {
		v = -1
	}
	*r.limit = facade.RateLimit{PerSecond: v}
	return nil
}

func (r *rateFlag) Type() string { return "float" }

func (r *rateFlag) String() string {
	if r.limit == nil || r.limit.PerSecond < 0 {
		return "0"
	}
	return strconv.FormatFloat(r.limit.PerSecond, 'f', -1, 64)
}
