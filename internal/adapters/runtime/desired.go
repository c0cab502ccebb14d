package runtime

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"
)

// ConfigHash is the one fingerprint of what in d needs the gateway restarted when it
// changes, on every runtime: the engine version and the environment the gateway starts with
// (the attached secrets and channel tokens, names and values, and the name of the Secret
// that holds them). It is the only place that lists those fields: the runtimes decide a
// restart from it (with RestartNonce, asked for on its own), and the kube runtime also
// stamps it, digested again with what only pods need, on the gateway's pod template.
//
// The gateway token is not in it: the engine hot-reloads it from its config. Identity,
// Egress and RuntimeClassName are not either: the engine config follows the identity
// without a restart, and the kube runtime applies the others to objects of their own.
//
// Its value is stored (the kube pod template's annotation, the local runtime's state): a
// change of this function's output restarts every agent when the platform is upgraded.
// TestConfigHashIsStable pins it.
func (d Desired) ConfigHash() string {
	h := sha256.New()
	write := func(s string) { h.Write([]byte(s)); h.Write([]byte{0}) }
	write(d.EngineVersion)
	write(d.EnvSecret)
	keys := make([]string, 0, len(d.Env))
	for k := range d.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		write(k)
		write(d.Env[k])
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}
