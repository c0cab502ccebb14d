package localcluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGVisorRuntimeOnlyWithItsBinaries: containerd gets the runsc handler, its shim on PATH and
// the shim's options only when BinDir holds both gVisor binaries.
func TestGVisorRuntimeOnlyWithItsBinaries(t *testing.T) {
	bin, dir := t.TempDir(), t.TempDir()
	c := &Cluster{opts: Options{BinDir: bin}, Dir: dir, LogDir: filepath.Join(dir, "logs")}
	if err := os.WriteFile(filepath.Join(bin, "runsc"), []byte("x"), 0o755); err != nil {
		t.Fatal(err)
	}
	g, err := c.gvisorSetup()
	if err != nil || g != nil || HasGVisor(bin) {
		t.Fatalf("runsc without its shim: %+v, %v", g, err)
	}
	if cfg := containerdConfig("r", "s", "sock", "cni", g); strings.Contains(cfg, "runsc") || g.env() != nil {
		t.Fatalf("containerd's config without gVisor names runsc:\n%s", cfg)
	}

	if err := os.WriteFile(filepath.Join(bin, "containerd-shim-runsc-v1"), []byte("x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if g, err = c.gvisorSetup(); err != nil || g == nil || !HasGVisor(bin) {
		t.Fatalf("with both binaries: %+v, %v", g, err)
	}
	cfg := containerdConfig("r", "s", "sock", "cni", g)
	for _, want := range []string{
		`containerd.runtimes.runsc]`,
		`runtime_type = "io.containerd.runsc.v1"`,
		`TypeUrl = "io.containerd.runsc.v1.options"`,
		`ConfigPath = "` + filepath.Join(dir, "runsc.toml") + `"`,
		`default_runtime_name = "runc"`,
	} {
		if !strings.Contains(cfg, want) {
			t.Errorf("containerd's config lacks %s:\n%s", want, cfg)
		}
	}
	if env := g.env(); len(env) != 1 || !strings.HasPrefix(env[0], "PATH="+filepath.Join(dir, "gvisor-bin")+":") {
		t.Errorf("containerd's env %v, want the shim's directory first on PATH", env)
	}
	if dst, err := os.Readlink(filepath.Join(dir, "gvisor-bin", "containerd-shim-runsc-v1")); err != nil || dst != filepath.Join(bin, "containerd-shim-runsc-v1") {
		t.Errorf("the shim's link: %s, %v", dst, err)
	}
	opts, err := os.ReadFile(filepath.Join(dir, "runsc.toml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`binary_name = "` + filepath.Join(bin, "runsc") + `"`,
		`root = "` + filepath.Join(dir, "runsc") + `"`, // in the directory: the leak check finds its processes
		`platform = "systrap"`,
	} {
		if !strings.Contains(string(opts), want) {
			t.Errorf("the shim's options lack %s:\n%s", want, opts)
		}
	}
	// Setting up again (a restart in the same directory) replaces the link.
	if _, err := c.gvisorSetup(); err != nil {
		t.Fatal(err)
	}
}
