package openclaw

import (
	"slices"
	"strings"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/engine"
)

// Model providers in OpenClaw's config (verified on 2026.9.6): `models.providers.<id>` with
// `baseUrl` and `apiKey` overrides a built-in provider's endpoint and credential in the
// default merge mode, without a `models` list or an `api` adapter (the built-in ones stay).
// The gateway then calls `<baseUrl>/v1/messages` with `x-api-key` (anthropic) or
// `<baseUrl>/chat/completions`, `/embeddings`... with `Authorization: Bearer` (openai).
const (
	keyModels    = "models"
	keyProviders = "providers"
	keyBaseURL   = "baseUrl"
	keyAPIKey    = "apiKey"
)

// setModelProviders points each of providers at the model proxy (baseUrl, apiKey; a user's
// other keys under the entry stay) and takes the proxy's URL and credential out of every
// other entry that holds a model-proxy credential (a provider whose secret was detached).
func setModelProviders(config []byte, providers []engine.ModelProvider) ([]byte, error) {
	cfg, err := parseConfig(config)
	if err != nil {
		return nil, err
	}
	changed := dropProxyEntries(cfg, func(id string) bool {
		return slices.ContainsFunc(providers, func(p engine.ModelProvider) bool { return p.Name == id })
	})
	for _, p := range providers {
		entry := object(cfg, keyModels, keyProviders, p.Name)
		entry[keyBaseURL], entry[keyAPIKey] = p.BaseURL, p.APIKey
		changed = true
	}
	if !changed {
		return config, nil
	}
	return marshalConfig(cfg)
}

// dropProxyEntries takes the model proxy's URL and credential out of every provider entry of
// cfg that holds a model-proxy credential, except those keep names, removing what is left
// empty. It reports whether it changed cfg.
func dropProxyEntries(cfg map[string]any, keep func(id string) bool) bool {
	models, _ := cfg[keyModels].(map[string]any)
	entries, _ := models[keyProviders].(map[string]any)
	changed := false
	for id, v := range entries {
		entry, ok := v.(map[string]any)
		key, _ := entry[keyAPIKey].(string)
		if !ok || !strings.HasPrefix(key, agentsv1.ModelCredentialPrefix) || keep(id) {
			continue
		}
		delete(entry, keyAPIKey)
		delete(entry, keyBaseURL)
		if len(entry) == 0 {
			delete(entries, id)
		}
		changed = true
	}
	if changed && len(entries) == 0 {
		delete(models, keyProviders)
		if len(models) == 0 {
			delete(cfg, keyModels)
		}
	}
	return changed
}
