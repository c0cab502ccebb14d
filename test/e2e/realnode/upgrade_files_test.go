package realnode

import "testing"

// The upgrade's file check lets the engine seed its own bootstrap files (its nightly dreaming
// sweep does, whatever the upgrade) and nothing else: a file lost, changed or new is reported.
func TestUpgradeFileCheck(t *testing.T) {
	before := map[string]string{"../openclaw.json": "c1", "./before.txt": "b1"}
	for _, c := range []struct {
		name    string
		after   map[string]string
		changed bool
	}{
		{"the same", map[string]string{"../openclaw.json": "c1", "./before.txt": "b1"}, false},
		{"the engine seeded its files", map[string]string{"../openclaw.json": "c1", "./before.txt": "b1",
			"./AGENTS.md": "a", "./SOUL.md": "s", "./IDENTITY.md": "i", "./USER.md": "u", "./BOOTSTRAP.md": "x"}, false},
		{"a file lost", map[string]string{"../openclaw.json": "c1"}, true},
		{"a file changed", map[string]string{"../openclaw.json": "c1", "./before.txt": "b2"}, true},
		{"the config changed", map[string]string{"../openclaw.json": "c2", "./before.txt": "b1"}, true},
		{"a new file", map[string]string{"../openclaw.json": "c1", "./before.txt": "b1", "./other.md": "o"}, true},
		{"a seeded name elsewhere", map[string]string{"../openclaw.json": "c1", "./before.txt": "b1", "./sub/AGENTS.md": "a"}, true},
	} {
		if got := filesChanged(before, c.after); (got != "") != c.changed {
			t.Errorf("%s: filesChanged = %q, want a change: %v", c.name, got, c.changed)
		}
	}
}
