package openclaw

import (
	"path"

	"github.com/agentplane/agentplane/internal/adapters/engine"
)

var _ engine.InstanceResetter = (*Engine)(nil)

// InstanceReset implements engine.InstanceResetter. Verified on 2026.9.6: a gateway booted on
// a blank home has in its state database (state/openclaw.sqlite) the device identity it
// pairs devices with (device_identities: an Ed25519 key pair), the HMAC key it signs config
// revisions with (config_revision_keys) and the record of its boot (gateway_boot_lifecycle).
// SIGUSR2 restarts it in-process (OPENCLAW_NO_RESPAWN=1, docs/cli/gateway/restart-and-
// supervision.md): in 2-3 s it reads its config again, makes a new HMAC key at once and a new
// device identity when it next needs one.
func (e *Engine) InstanceReset() engine.InstanceReset {
	return engine.InstanceReset{
		DB: path.Join(StateDir, "state", "openclaw.sqlite"),
		SQL: []string{
			"DELETE FROM device_identities",
			"DELETE FROM config_revision_keys",
			"DELETE FROM gateway_boot_lifecycle",
		},
		Signal: "SIGUSR2",
	}
}
