package local

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/adapters/engine"
	"github.com/agentplane/agentplane/internal/adapters/engine/openclaw"
)

// TestTemplateKeyNamesWhatTheImageDependsOn: a template made for another engine version or
// install, another CRIU, another reseed addon or another rendering of the gateway (its
// environment) is another template: a stale one is never restored.
func TestTemplateKeyNamesWhatTheImageDependsOn(t *testing.T) {
	dir := t.TempDir()
	criu, reseed := filepath.Join(dir, "criu"), filepath.Join(dir, ReseedName)
	for _, p := range []string{criu, reseed} {
		if err := os.WriteFile(p, []byte("x"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r := &Runtime{opts: Options{Engine: openclaw.New(), GatewayHeapMiB: 1536}, ckpt: &checkpointer{criu: criu}, reseed: reseed}
	base := r.templateKey(engine.PinnedVersion, "/engines/a")
	if again := r.templateKey(engine.PinnedVersion, "/engines/a"); again != base {
		t.Fatalf("the same inputs gave %s and %s", base, again)
	}
	later := time.Now().Add(time.Hour)
	changes := map[string]func(){
		"another version":      func() {},
		"another engine dir":   func() {},
		"another CRIU":         func() { _ = os.Chtimes(criu, later, later) },
		"another reseed addon": func() { _ = os.WriteFile(reseed, []byte("xy"), 0o755) },
		"another heap":         func() { r.opts.GatewayHeapMiB = 2048 },
	}
	seen := map[string]string{base: "the base"}
	for name, change := range changes {
		change()
		version, engineDir := engine.PinnedVersion, "/engines/a"
		switch name {
		case "another version":
			version = "2026.9.7"
		case "another engine dir":
			engineDir = "/engines/b"
		}
		k := r.templateKey(version, engineDir)
		if other, dup := seen[k]; dup {
			t.Errorf("%s gave the key of %s: %s", name, other, k)
		}
		seen[k] = name
	}
}
