package openclaw

import (
	"slices"

	"github.com/agentplane/agentplane/internal/adapters/engine"
)

// Keys of the config file that the user does not own. OpenClaw writes `meta` itself (its
// migrations and the version that last touched the file, e.g. on `plugins install`), and
// `gateway.auth` is the runtime's: the gateway token (in the file for the local runtime, from
// OPENCLAW_GATEWAY_TOKEN on pods) and its rotation.
const (
	keyMeta    = "meta"
	keyGateway = "gateway"
	keyAuth    = "auth"
)

// RenderConfig implements engine.Engine. The file is base (the user's config; nil: live as
// it is), with `meta` and `gateway.auth` taken from live, every channel type in managed
// without a channel removed (with the plugin entry only the platform wrote), each of
// channels written (SetChannel: a user's own keys under channels.<type> stay), the model
// providers set (setModelProviders) and the lean defaults the file does not set otherwise
// (lean.go).
func (e *Engine) RenderConfig(r engine.Render) ([]byte, error) {
	base, live, managed, channels := r.Base, r.Live, r.Managed, r.Channels
	if base == nil {
		base = live
	}
	cfg, err := parseConfig(base)
	if err != nil {
		return nil, err
	}
	if live != nil {
		cur, err := parseConfig(live)
		if err != nil {
			return nil, err
		}
		carry(cfg, cur, keyMeta)
		if gw, ok := cur[keyGateway].(map[string]any); ok {
			carry(object(cfg, keyGateway), gw, keyAuth)
		} else if gw, ok := cfg[keyGateway].(map[string]any); ok {
			delete(gw, keyAuth)
		}
	}
	out, err := marshalConfig(cfg)
	if err != nil {
		return nil, err
	}
	for _, t := range managed {
		if slices.ContainsFunc(channels, func(ch engine.Channel) bool { return ch.Type == t }) {
			continue
		}
		if out, err = e.RemoveChannel(out, t); err != nil {
			return nil, err
		}
	}
	for _, ch := range channels {
		if out, err = e.SetChannel(out, ch); err != nil {
			return nil, err
		}
	}
	if out, err = setModelProviders(out, r.ModelProviders); err != nil {
		return nil, err
	}
	if cfg, err = parseConfig(out); err != nil {
		return nil, err
	}
	applyLean(cfg)
	return marshalConfig(cfg)
}

// UserConfig implements engine.Engine: config without `meta`, `gateway.auth`, the model
// proxy's provider URLs and credentials, the lean defaults and the channel types in managed (a config read back from the agent, then sent again, holds them all).
func (e *Engine) UserConfig(config []byte, managed []string) ([]byte, error) {
	cfg, err := parseConfig(config)
	if err != nil {
		return nil, err
	}
	delete(cfg, keyMeta)
	if gw, ok := cfg[keyGateway].(map[string]any); ok {
		delete(gw, keyAuth)
	}
	// The platform renders the model proxy's entries (their credential rotates) and the lean
	// defaults.
	dropProxyEntries(cfg, func(string) bool { return false })
	stripLean(cfg)
	out, err := marshalConfig(cfg)
	if err != nil {
		return nil, err
	}
	for _, t := range managed {
		if out, err = e.RemoveChannel(out, t); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// carry sets dst[key] to src[key], or deletes it when src has none.
func carry(dst, src map[string]any, key string) {
	if v, ok := src[key]; ok {
		dst[key] = v
	} else {
		delete(dst, key)
	}
}
