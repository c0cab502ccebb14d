package main

import (
	"testing"

	"github.com/agentplane/agentplane/internal/platform"
)

// TestRenderingRolloutFlag: waves by default; next-restart or waves only.
func TestRenderingRolloutFlag(t *testing.T) {
	cmd := newManagerCommand()
	if got := cmd.Flags().Lookup("rendering-rollout").DefValue; got != platform.RenderingWaves {
		t.Errorf("--rendering-rollout defaults to %q, want waves", got)
	}
	for v, ok := range map[string]bool{"waves": true, "next-restart": true, "": false, "now": false} {
		if err := checkRenderingRollout(v); (err == nil) != ok {
			t.Errorf("--rendering-rollout=%q: %v", v, err)
		}
	}
}
