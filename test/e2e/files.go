package e2e

import (
	"slices"
	"strings"
)

// EngineSeeded are the files the engine writes itself at its workspace's root on an agent's
// first run, when they are missing (`start/bootstrapping.md` in its docs). That run need not
// be the user's or the platform's: the engine's nightly dreaming sweep (memory-core,
// `0 3 * * *` in the gateway's time zone by default) is one, so a real gateway awake at 03:00
// seeds them in a workspace without them, whatever a test does to it.
var EngineSeeded = []string{"AGENTS.md", "SOUL.md", "IDENTITY.md", "USER.md", "BOOTSTRAP.md"}

// FilesChanged says how the files after differ from before (digest by path, relative to the
// workspace's root, with or without a leading "./"): each file lost or changed, and each new
// one that is not one the engine seeds at the root ("" when none). A test that compares a real
// gateway's workspace across a span of wall-clock time holds the platform to this, not to
// the whole listing: the engine's own seeding is not the platform's doing.
func FilesChanged(before, after map[string]string) string {
	var diffs []string
	for path, sum := range before {
		switch got, ok := after[path]; {
		case !ok:
			diffs = append(diffs, path+" lost")
		case got != sum:
			diffs = append(diffs, path+" changed")
		}
	}
	for path := range after {
		if _, ok := before[path]; !ok && !slices.Contains(EngineSeeded, strings.TrimPrefix(path, "./")) {
			diffs = append(diffs, path+" new")
		}
	}
	slices.Sort(diffs)
	return strings.Join(diffs, ", ")
}
