// Package controlplane builds the test control plane, kube-apiserver and etcd, from the Go
// module proxy with the module graph the project pins in hack/tools/controlplane. A copy of
// that go.mod and go.sum is embedded here (pins/, kept equal by hack/verify-generated.sh), so
// `agentplane envtest-assets` works from the module alone: it writes them into a temporary
// module, runs go build there and caches the binaries under the user cache dir, keyed by the
// pins and the Go version, where a later run (or the test kit) finds them.
package controlplane

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

var (
	//go:embed pins/go.mod.txt
	goMod []byte
	//go:embed pins/go.sum.txt
	goSum []byte
)

// Binaries are the files a control-plane directory holds.
var Binaries = []string{"kube-apiserver", "etcd"}

// KubernetesVersion is the k8s.io/kubernetes version of the pins (v1.37.2).
func KubernetesVersion() string {
	for _, line := range strings.Split(string(goMod), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "k8s.io/kubernetes" {
			return f[1]
		}
	}
	return ""
}

// Key names the cache entry of the pins built by goVersion (`go env GOVERSION`): the first 16
// hex digits of sha256(go.mod, go.sum, goVersion and a newline), as hack/build-controlplane.sh
// has always computed it.
func Key(goVersion string) string {
	h := sha256.New()
	h.Write(goMod)
	h.Write(goSum)
	io.WriteString(h, goVersion+"\n")
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// CacheRoot is $AGENTPLANE_CACHE_DIR, else agentplane under the user cache dir.
func CacheRoot() (string, error) {
	if d := os.Getenv("AGENTPLANE_CACHE_DIR"); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "agentplane"), nil
}

// Dir is the cache directory of the binaries built by goVersion.
func Dir(goVersion string) (string, error) {
	root, err := CacheRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "controlplane", Key(goVersion)), nil
}

// Complete reports whether dir holds every binary.
func Complete(dir string) bool {
	for _, b := range Binaries {
		if st, err := os.Stat(filepath.Join(dir, b)); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// Builder builds the binaries.
type Builder struct {
	// Go is the go command (default: "go" on PATH).
	Go string
	// Log receives progress lines (default: discarded).
	Log io.Writer
}

// Ensure returns the cache directory of the binaries, building them first when they are not
// there (about 10 minutes on 2 cores, downloads from GOPROXY included).
func (b Builder) Ensure(ctx context.Context) (string, error) {
	if b.Go == "" {
		b.Go = "go"
	}
	if b.Log == nil {
		b.Log = io.Discard
	}
	raw, err := exec.CommandContext(ctx, b.Go, "env", "GOVERSION").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOVERSION: %w", err)
	}
	dir, err := Dir(strings.TrimSpace(string(raw)))
	if err != nil || Complete(dir) {
		return dir, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(dir, "build.")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	if err := b.build(ctx, tmp); err != nil {
		return "", err
	}
	// Each rename is atomic; Complete only says yes once both are in place.
	for _, name := range Binaries {
		if err := os.Rename(filepath.Join(tmp, "out", name), filepath.Join(dir, name)); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// build builds the binaries into tmp/out from a module in tmp/mod made of the pins.
func (b Builder) build(ctx context.Context, tmp string) error {
	mod, out := filepath.Join(tmp, "mod"), filepath.Join(tmp, "out")
	if err := os.MkdirAll(mod, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(mod, "go.mod"), goMod, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(mod, "go.sum"), goSum, 0o644); err != nil {
		return err
	}
	v := KubernetesVersion()
	minor := strings.SplitN(strings.TrimPrefix(v, "v1."), ".", 2)[0]
	steps := []struct{ what, pkg, ldflags, out string }{
		{"etcd (about 1 minute on 2 cores)", "go.etcd.io/etcd/server/v3", "-s -w", "etcd"},
		{"kube-apiserver " + v + " (about 10 minutes on 2 cores)", "k8s.io/kubernetes/cmd/kube-apiserver", "-s -w" +
			" -X k8s.io/component-base/version.gitVersion=" + v +
			" -X k8s.io/component-base/version.gitMajor=1" +
			" -X k8s.io/component-base/version.gitMinor=" + minor, "kube-apiserver"},
	}
	for _, s := range steps {
		fmt.Fprintf(b.Log, "[control-plane] building %s\n", s.what)
		start := time.Now()
		cmd := exec.CommandContext(ctx, b.Go, "build", "-trimpath", "-ldflags", s.ldflags, "-o", filepath.Join(out, s.out), s.pkg)
		cmd.Dir = mod
		cmd.Env = append(os.Environ(), buildEnv(os.Getenv("GOFLAGS"))...)
		var stderr strings.Builder
		cmd.Stdout, cmd.Stderr = b.Log, io.MultiWriter(b.Log, &stderr)
		if err := cmd.Run(); err != nil {
			return errors.Join(fmt.Errorf("go build %s: %w", s.pkg, err), errors.New(lastLines(stderr.String(), 20)))
		}
		fmt.Fprintf(b.Log, "[control-plane] built %s in %s\n", s.out, time.Since(start).Round(time.Second))
	}
	return nil
}

// buildEnv is what the builds add to the environment. The pins decide every version: no
// workspace, no vendor dir, no edits to go.mod (-mod=readonly, after the caller's GOFLAGS,
// which stay). Dropping the caller's GOFLAGS once cost every fresh machine about 20 minutes:
// make exports GOFLAGS=-trimpath, so kube-apiserver's packages were compiled without it and
// hack/build-cluster.sh's kubelet and controllers, built with it, compiled them all again.
// Both builds also pass -trimpath themselves, so they share Go's build cache however they are
// started. Cgo is off, as in the node's binaries' build and make test's (a package's compiled
// form depends on CGO_ENABLED through net and os/user): left to the machine, it was on where a C
// compiler was installed, and on a fresh machine the compiler arrives midway, with the sandbox's
// packages, so kube-apiserver built without cgo and the node's binaries with it compiled every
// Kubernetes package a second time.
func buildEnv(callerGoflags string) []string {
	return []string{"GOWORK=off", "CGO_ENABLED=0", "GOFLAGS=" + strings.TrimSpace(callerGoflags+" -mod=readonly")}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
