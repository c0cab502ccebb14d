package main

import (
	"testing"

	"github.com/spf13/cobra"

	"github.com/agentplane/agentplane/facade"
	"github.com/agentplane/agentplane/internal/platform"
)

// TestRateLimitFlags: the facade's rate limits are on by default (the facade's defaults), a
// rate sets a burst of twice as many, 0 turns a limit off, and a negative rate is refused.
func TestRateLimitFlags(t *testing.T) {
	parse := func(args ...string) (platform.Options, error) {
		var o platform.Options
		cmd := &cobra.Command{Use: "x"}
		addPlatformFlags(cmd, &o, ":8080")
		return o, cmd.Flags().Parse(args)
	}
	o, err := parse()
	if err != nil || o.RateLimits.PerToken != facade.DefaultRateLimitPerToken || o.RateLimits.PerAddress != facade.DefaultRateLimitPerAddress {
		t.Fatalf("defaults: %+v, %v", o.RateLimits, err)
	}
	o, err = parse("--rate-limit-per-token", "5", "--rate-limit-per-address", "0")
	if err != nil {
		t.Fatal(err)
	}
	if o.RateLimits.PerToken != (facade.RateLimit{PerSecond: 5}) || o.RateLimits.PerAddress.PerSecond >= 0 {
		t.Fatalf("--rate-limit-per-token 5 --rate-limit-per-address 0: %+v", o.RateLimits)
	}
	if _, err := parse("--rate-limit-per-token", "-3"); err == nil {
		t.Fatal("a negative rate was accepted")
	}
}
