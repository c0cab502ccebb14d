package runtime

import (
	"testing"

	"github.com/agentplane/agentplane/internal/adapters/engine"
)

// TestConfigHashIsStable pins the hash of a fixed desired state. The hash is stored on every
// running gateway (the kube pod template's annotation, the local runtime's state): a new
// value for the same desired state restarts every agent when the platform is upgraded. If
// this test fails, the change restarts agents; make it only with the upgrade's waves.
func TestConfigHashIsStable(t *testing.T) {
	d := Desired{
		EngineVersion: "2026.9.6", EnvSecret: "a1-env",
		Env:          map[string]string{"OPENAI_API_KEY": "sk-1", "SLACK_BOT_TOKEN": "xoxb-1"},
		GatewayToken: "not-in-the-hash", RestartNonce: "asked-for-on-its-own",
	}
	if got, want := d.ConfigHash(), "60c1e289a2a7619d"; got != want {
		t.Fatalf("ConfigHash = %s, want %s: the same desired state hashes differently, which restarts every agent on upgrade", got, want)
	}
}

// TestConfigHashFields: what needs a restart on every runtime changes the hash, what the
// engine reloads or a runtime applies elsewhere does not.
func TestConfigHashFields(t *testing.T) {
	base := func() Desired {
		return Desired{EngineVersion: engine.PinnedVersion, EnvSecret: "a1-env", Env: map[string]string{"K": "v"}, GatewayToken: "t"}
	}
	for _, tc := range []struct {
		name    string
		mutate  func(*Desired)
		changes bool
	}{
		{"nothing", func(*Desired) {}, false},
		{"engine version", func(d *Desired) { d.EngineVersion = "2026.9.7" }, true},
		{"env value", func(d *Desired) { d.Env["K"] = "w" }, true},
		{"env key", func(d *Desired) { d.Env["L"] = "v" }, true},
		{"env secret name", func(d *Desired) { d.EnvSecret = "a1-env-2" }, true},
		{"env key and value swap", func(d *Desired) { d.Env = map[string]string{"Kv": ""} }, true},
		{"gateway token (hot-reloaded)", func(d *Desired) { d.GatewayToken = "u" }, false},
		{"restart nonce (compared on its own)", func(d *Desired) { d.RestartNonce = "n" }, false},
		{"identity (engine config)", func(d *Desired) { d.Identity.Name = "Other" }, false},
		{"egress (its own objects)", func(d *Desired) { d.Egress = []string{"slack"} }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := base()
			tc.mutate(&d)
			if changed := d.ConfigHash() != base().ConfigHash(); changed != tc.changes {
				t.Fatalf("hash changed = %v, want %v", changed, tc.changes)
			}
		})
	}
}
