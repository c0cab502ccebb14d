package controlplane

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
)

// The embedded pins are the ones hack/build-controlplane.sh and the project's CI use.
func TestPinsMatchTheToolsModule(t *testing.T) {
	for name, embedded := range map[string][]byte{"go.mod": goMod, "go.sum": goSum} {
		onDisk, err := os.ReadFile(filepath.Join("..", "..", "..", "hack", "tools", "controlplane", name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(onDisk, embedded) {
			t.Errorf("internal/devtools/controlplane/pins/%s.txt differs from hack/tools/controlplane/%s: copy it", name, name)
		}
	}
	if v := KubernetesVersion(); !strings.HasPrefix(v, "v1.") {
		t.Errorf("KubernetesVersion() = %q", v)
	}
}

// The node binaries', kwok's, helm's and promtool's modules, the project's own and its
// example's require every module they share with the control plane at the control plane's
// version: Go's build cache then compiles the Kubernetes libraries and their dependencies once
// for all of them, and make test's packages find them compiled by the prerequisites' builds
// (the node binaries took 15 minutes on 2 cores when the versions differed, 3.5 after
// kube-apiserver once they agreed). A go.mod lists every module that provides a package to its
// build, so comparing the require lines covers them all.
func TestToolModulesShareTheControlPlanesVersions(t *testing.T) {
	pins := requires(t, "pins", goMod)
	root := filepath.Join("..", "..", "..")
	modules := []string{"hack/tools/cluster", "hack/tools/kwok", "hack/tools/helm", "hack/tools/promtool",
		".", "examples/envtest-consumer"}
	for _, dir := range modules {
		path := filepath.Join(root, dir, "go.mod")
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range differences(requires(t, path, b), pins) {
			t.Errorf("%s/go.mod: %s (go get it there, or raise the control plane's pins and the others with it)", dir, d)
		}
	}
}

// differences lists each module both maps require at different versions, sorted.
func differences(got, pins map[string]string) []string {
	var out []string
	for mod, v := range got {
		if want, ok := pins[mod]; ok && v != want {
			out = append(out, fmt.Sprintf("%s %s, the control plane pins %s", mod, v, want))
		}
	}
	sort.Strings(out)
	return out
}

// A module at another version than the pins' is found, whether the pins require or replace it.
func TestDifferencesFindsAModuleOffThePins(t *testing.T) {
	pins := requires(t, "pins", goMod)
	planted := map[string]string{"example.com/only-here": "v1.0.0"}
	for mod, v := range pins {
		planted[mod] = v
	}
	if d := differences(planted, pins); len(d) != 0 {
		t.Fatalf("the pins differ from themselves: %v", d)
	}
	planted["k8s.io/api"] = "v0.1.0"       // replaced in the pins
	planted["golang.org/x/net"] = "v0.0.1" // required in the pins
	d := differences(planted, pins)
	if len(d) != 2 || !strings.HasPrefix(d[0], "golang.org/x/net v0.0.1,") || !strings.HasPrefix(d[1], "k8s.io/api v0.1.0,") {
		t.Errorf("differences = %v", d)
	}
}

// requires are the versions a go.mod selects, by module path (a replacement's version where
// one replaces the module).
func requires(t *testing.T, name string, gomod []byte) map[string]string {
	t.Helper()
	f, err := modfile.Parse(name, gomod, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, r := range f.Require {
		out[r.Mod.Path] = r.Mod.Version
	}
	for _, r := range f.Replace {
		if r.New.Version != "" {
			out[r.Old.Path] = r.New.Version
		}
	}
	return out
}

// fakeGo is a go command that answers `go env GOVERSION` and, for `go build -trimpath -ldflags
// L -o OUT PKG` run on the pins with GOFLAGS $FAKEGO_WANT_GOFLAGS, writes an executable OUT and
// appends "PKG L" to $FAKEGO_LOG.
const fakeGo = `#!/bin/sh
if [ "$1" = env ]; then echo go1.99.0; exit 0; fi
shift # build
[ "$1" = -trimpath ] || { echo "not -trimpath: $*" >&2; exit 1; }
ldflags="$3"; out="$5"; pkg="$6"
cmp -s go.mod "$FAKEGO_PINS" || { echo "go.mod is not the pins" >&2; exit 1; }
[ "$GOFLAGS" = "$FAKEGO_WANT_GOFLAGS" ] && [ "$GOWORK" = off ] && [ "$CGO_ENABLED" = 0 ] ||
	{ echo "env not pinned: GOFLAGS=$GOFLAGS GOWORK=$GOWORK CGO_ENABLED=$CGO_ENABLED" >&2; exit 1; }
mkdir -p "$(dirname "$out")" && printf '#!/bin/sh\n' > "$out" && chmod +x "$out"
echo "$pkg $ldflags" >> "$FAKEGO_LOG"
`

func TestEnsureBuildsOnceIntoTheCache(t *testing.T) {
	tmp := t.TempDir()
	goBin := filepath.Join(tmp, "go")
	if err := os.WriteFile(goBin, []byte(fakeGo), 0o755); err != nil {
		t.Fatal(err)
	}
	pins := filepath.Join(tmp, "pins.mod")
	if err := os.WriteFile(pins, goMod, 0o644); err != nil {
		t.Fatal(err)
	}
	logFile := filepath.Join(tmp, "builds.log")
	t.Setenv("FAKEGO_LOG", logFile)
	t.Setenv("FAKEGO_PINS", pins)
	t.Setenv("AGENTPLANE_CACHE_DIR", filepath.Join(tmp, "cache"))
	// The caller's GOFLAGS stay (make exports -trimpath, which the node's binaries build with
	// too: dropped, each build compiled the Kubernetes packages on its own).
	t.Setenv("GOFLAGS", "-trimpath -tags=planted")
	t.Setenv("FAKEGO_WANT_GOFLAGS", "-trimpath -tags=planted -mod=readonly")
	// Cgo is off whatever the machine says (make test's packages build without it).
	t.Setenv("CGO_ENABLED", "1")

	var progress bytes.Buffer
	b := Builder{Go: goBin, Log: &progress}
	dir, err := b.Ensure(context.Background())
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	if want := filepath.Join(tmp, "cache", "controlplane", Key("go1.99.0")); dir != want {
		t.Errorf("dir %s, want %s", dir, want)
	}
	if !Complete(dir) {
		t.Fatalf("%s lacks binaries", dir)
	}
	builds, _ := os.ReadFile(logFile)
	lines := strings.Split(strings.TrimSpace(string(builds)), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "go.etcd.io/etcd/server/v3 ") ||
		!strings.HasPrefix(lines[1], "k8s.io/kubernetes/cmd/kube-apiserver ") ||
		!strings.Contains(lines[1], "version.gitVersion="+KubernetesVersion()) {
		t.Errorf("builds:\n%s", builds)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("leftovers in %s: %v", dir, entries)
	}

	// A second run finds the cache and builds nothing.
	if _, err := b.Ensure(context.Background()); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(logFile); !bytes.Equal(again, builds) {
		t.Errorf("built again:\n%s", again)
	}
	// Another Go version is another entry.
	if Key("go1.99.1") == Key("go1.99.0") {
		t.Error("the key ignores the Go version")
	}
}

// The key is the one hack/build-controlplane.sh derives (its pipeline, run here on the tools
// module's files), so binaries built by either are found by both.
func TestKeyIsTheScriptsKey(t *testing.T) {
	mod := filepath.Join("..", "..", "..", "hack", "tools", "controlplane")
	out, err := exec.Command("sh", "-c", `{ cat "$1/go.mod" "$1/go.sum"; echo go1.26.8; } | sha256sum | cut -c1-16`, "sh", mod).Output()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := Key("go1.26.8"), strings.TrimSpace(string(out)); got != want {
		t.Errorf("Key = %s, the script's key %s", got, want)
	}
}
