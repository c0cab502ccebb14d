package e2e

import "testing"

// The file check lets the engine seed its own bootstrap files at the workspace's root (its
// nightly dreaming sweep does, whatever a test does) and nothing else: a file lost, changed
// or new is reported, with paths as `find .` prints them and as filepath.Rel makes them.
func TestFilesChanged(t *testing.T) {
	for _, c := range []struct {
		name          string
		before, after map[string]string
		changed       bool
	}{
		{"the same", map[string]string{"../openclaw.json": "c1", "./before.txt": "b1"},
			map[string]string{"../openclaw.json": "c1", "./before.txt": "b1"}, false},
		{"the engine seeded its files", map[string]string{"../openclaw.json": "c1", "./before.txt": "b1"},
			map[string]string{"../openclaw.json": "c1", "./before.txt": "b1",
				"./AGENTS.md": "a", "./SOUL.md": "s", "./IDENTITY.md": "i", "./USER.md": "u", "./BOOTSTRAP.md": "x"}, false},
		{"seeded, relative paths", map[string]string{"proof.txt": "p"},
			map[string]string{"proof.txt": "p", "AGENTS.md": "a", "BOOTSTRAP.md": "x"}, false},
		{"a file lost", map[string]string{"../openclaw.json": "c1", "./before.txt": "b1"},
			map[string]string{"../openclaw.json": "c1"}, true},
		{"a file changed", map[string]string{"../openclaw.json": "c1", "./before.txt": "b1"},
			map[string]string{"../openclaw.json": "c1", "./before.txt": "b2"}, true},
		{"the config changed", map[string]string{"../openclaw.json": "c1", "./before.txt": "b1"},
			map[string]string{"../openclaw.json": "c2", "./before.txt": "b1"}, true},
		{"a seeded file changed", map[string]string{"AGENTS.md": "a"}, map[string]string{"AGENTS.md": "b"}, true},
		{"a new file", map[string]string{"./before.txt": "b1"}, map[string]string{"./before.txt": "b1", "./other.md": "o"}, true},
		{"a seeded name elsewhere", map[string]string{"./before.txt": "b1"},
			map[string]string{"./before.txt": "b1", "./sub/AGENTS.md": "a"}, true},
		{"a seeded name elsewhere, relative", map[string]string{}, map[string]string{"sub/SOUL.md": "s"}, true},
	} {
		if got := FilesChanged(c.before, c.after); (got != "") != c.changed {
			t.Errorf("%s: FilesChanged = %q, want a change: %v", c.name, got, c.changed)
		}
	}
}
