package openclaw

import (
	"reflect"
	"slices"
)

// The lean defaults: start-time work and plugins of OpenClaw 2026.9.6 that a hosted agent has
// no use for, switched off in every config the platform writes (InitialConfig, RenderConfig)
// unless the config says otherwise. They are the platform's, like gateway.auth: UserConfig
// leaves them out, so a user's config read back and sent again gets them anew, and a user who
// wants one on sets it (`update.checkOnStart: true`, `plugins.entries.canvas.enabled: true`...).
//
//   - update.checkOnStart: the gateway asks telemetry.openclaw.ai for a newer release at start
//     and daily. The platform pins the engine version (Agent.spec.engine.version).
//   - models.catalogRefresh.enabled: the hosted model catalog is fetched in the background at
//     start and every six hours (and applies only on the next restart). The catalog shipped
//     with the release stays; model calls are unchanged (the model proxy's providers are
//     models.providers entries).
//   - leanOffPlugins: bundled plugins enabled by default that serve a desktop or a paired
//     node host (macOS canvas panels, computer control, Linux node desktop features, Talk
//     voice, client IP geolocation with its database); an agent here is a headless gateway.
//   - leanOffChannelPlugins: the external channel plugins whose channel the platform's relay
//     names in every local gateway's environment (ChannelEnv: SLACK_API_URL, DISCORD_API_URL),
//     for an agent without that channel. The engine's startup preflight takes any SLACK_* or
//     DISCORD_* variable for a configured channel (its gateway does not: ambient channels are
//     off by default), finds its plugin missing and keeps its state migrations pending: five
//     [state-migrations] warnings in every boot's log, the migrations run again at every later
//     start, and a config written during a start makes the engine refuse to be ready (exit
//     78). An explicitly disabled entry takes the channel out of that check and installs
//     nothing (the engine's plugin install keeps it disabled); SetChannel enables it with the
//     channel, in the same config change. Measured with the bare engine and the relay's two
//     variables (2026-12-06, three restarts of one home each side): restarts 17.2-18.7 s and
//     21.7-24.4 CPU-s without the entries, 11.2-12.0 s and 13.9-14.6 CPU-s with them; first
//     starts 13.0-14.3 s without, 11.7 s with. A disabled channels.<id> entry would do the
//     same for the check, but it is a stateful key: a new agent's first start then runs the
//     legacy state migrations (+3.8-4.6 s).
//     Other channels need no entry: a bundled channel plugin loads only for a configured
//     channel, and SetChannel trusts an external one only for a channel the agent has.
//
// Not memory-core's "dreaming" (a managed cron job it creates at start, about 0.2 s, and a
// background memory sweep on it): its switch is plugins.entries.memory-core.config, and a
// plugin entry with a config makes the engine treat a new agent's first start as an upgrade
// (it runs its legacy state migrations, about 2 s, instead of taking the new-install path),
// which costs more than dreaming does. So are keys the engine counts as stateful (channels,
// cron, memory, tools...): the platform writes none of them at create.
var (
	leanOffPlugins        = []string{"canvas", "cua-computer", "geolocation", "linux-node", "talk-voice"}
	leanOffChannelPlugins = []string{"slack", "discord"}
	leanSettings          = []leanSetting{
		{[]string{"update", "checkOnStart"}, false},
		{[]string{keyModels, "catalogRefresh", "enabled"}, false},
	}
)

type leanSetting struct {
	path  []string
	value any
}

// applyLean sets each lean default cfg does not set itself: a setting whose path is free (a
// value the user set, or a non-object on the way, stays as it is), {enabled:false} for each
// of leanOffPlugins without an entry of its own, and for each of leanOffChannelPlugins
// without an entry nor a channels entry.
func applyLean(cfg map[string]any) {
	for _, s := range leanSettings {
		parent, ok := objectIfFree(cfg, s.path[:len(s.path)-1])
		if !ok {
			continue
		}
		if _, set := parent[s.path[len(s.path)-1]]; !set {
			parent[s.path[len(s.path)-1]] = s.value
		}
	}
	entries, ok := objectIfFree(cfg, []string{"plugins", "entries"})
	if !ok {
		return
	}
	for _, id := range leanOffPlugins {
		if _, set := entries[id]; !set {
			entries[id] = map[string]any{"enabled": false}
		}
	}
	for _, id := range leanOffChannelPlugins {
		_, set := entries[id]
		if _, channel := lookup(cfg, []string{"channels", id}); !set && !channel {
			entries[id] = map[string]any{"enabled": false}
		}
	}
}

// stripLean takes out of cfg what applyLean would put back: each lean setting holding its lean
// value and each {enabled:false} entry of leanOffPlugins and leanOffChannelPlugins, then the
// objects left empty.
func stripLean(cfg map[string]any) {
	for _, s := range leanSettings {
		if v, ok := lookup(cfg, s.path); ok && reflect.DeepEqual(v, s.value) {
			remove(cfg, s.path)
		}
	}
	for _, id := range slices.Concat(leanOffPlugins, leanOffChannelPlugins) {
		p := []string{"plugins", "entries", id}
		if v, ok := lookup(cfg, p); ok && reflect.DeepEqual(v, map[string]any{"enabled": false}) {
			remove(cfg, p)
		}
	}
}

// objectIfFree returns the object at path, creating missing ones, unless a non-object is in
// the way (false).
func objectIfFree(cfg map[string]any, path []string) (map[string]any, bool) {
	cur := cfg
	for _, k := range path {
		v, set := cur[k]
		if !set {
			v = map[string]any{}
			cur[k] = v
		}
		next, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		cur = next
	}
	return cur, true
}

func lookup(cfg map[string]any, path []string) (any, bool) {
	var cur any = cfg
	for _, k := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[k]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// remove deletes the value at path and every object on the way that it leaves empty.
func remove(cfg map[string]any, path []string) {
	if len(path) == 0 {
		return
	}
	if len(path) > 1 {
		child, ok := cfg[path[0]].(map[string]any)
		if !ok {
			return
		}
		remove(child, path[1:])
		if len(child) > 0 {
			return
		}
	}
	delete(cfg, path[0])
}
