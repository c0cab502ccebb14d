package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/agentplane/agentplane/internal/adapters/archive"
	"github.com/agentplane/agentplane/internal/adapters/engine"
)

// The engine's compile cache, shared read-only by every sandbox.
//
// OpenClaw turns on Node's module compile cache (module.enableCompileCache) in
// os.tmpdir()/node-compile-cache/openclaw/<version>/<package.json mtime-size>, and Node keeps
// its V8 code cache there in a dir named after itself and the process's uid
// (v24.21.0-x64-<flags hash>-<uid>). Unsandboxed gateways share the host's /tmp, so all but the
// first start warm; each sandbox has a private, empty /tmp and would compile every module of
// the engine anew (about 2 s of a 10 s boot).
//
// So the runtime warms the cache once per engine dir (and so per engine and Node version): one
// gateway boot in a sandbox of its own (a fresh home, no agent's files, secrets or config, a uid
// no agent has) with a staging dir bound read-write at the sandbox's /tmp/node-compile-cache,
// stopped once ready (Node writes the cache at exit). The sandbox is gone before the staging
// dir is sealed: everything in it is given to the manager (files 0644, dirs 0755; anything
// else, a symlink, is removed) and it is renamed to <CompileCacheDir>/<key>, once. Every later
// sandbox of that engine, gateway or command, gets each of Node's uid-named dirs bound
// read-only at the same place under its own /tmp, renamed to its own uid. Node reads it;
// what it would add at exit fails to write (EROFS) and Node goes on, as it does without a
// cache.
//
// An agent can therefore neither write what another agent's Node loads (a poisoned V8 code
// cache runs as the other agent) nor what a later warm-up seals: the bind is read-only, the
// files are the manager's, and the only process that ever wrote them ran the engine on a home
// no agent has touched. NODE_COMPILE_CACHE is left unset: OpenClaw 2026.9 answers a set one
// by respawning itself under a launcher process that stays (a second Node per gateway).
const (
	compileCacheDirName = "compile-cache"
	// sandboxCompileCache is OpenClaw's cache dir inside a sandbox (os.tmpdir() is /tmp there).
	sandboxCompileCache = "/tmp/node-compile-cache"
	// compileCacheManifest, in a sealed cache, lists Node's uid-named dirs.
	compileCacheManifest = ".agentplane-compile-cache.json"
	// warmUID is the uid the warm-up and the manager's sandbox probes run as (as root): below
	// every agent's uid, and no agent's files are ever in their homes.
	warmUID = sandboxUIDBase - 1
	// warmingPrefix starts the name of a warm-up's staging dir in CompileCacheDir.
	warmingPrefix = ".warming-"
	// A failed warm-up of an engine dir is not tried again for warmRetryFirst, doubling with
	// each failure in a row up to warmRetryMax (a boot that failed on a starved machine is
	// tried again soon; one that always fails costs a boot every 10 minutes).
	warmRetryFirst = time.Minute
	warmRetryMax   = 10 * time.Minute
	// warmStopTimeout is how long the stopped warm-up gets to exit before SIGKILL: Node writes
	// the compile cache at exit (a few thousand files), which a loaded machine does not do in
	// a gateway's StopTimeout, and a killed warm-up leaves no cache.
	warmStopTimeout = 2 * time.Minute
)

// warmFailure is an engine dir's failed warm-ups in a row and when the last one failed.
type warmFailure struct {
	at time.Time
	n  int
}

// retryAt is when a warm-up is tried again after f.
func (f warmFailure) retryAt() time.Time {
	wait := warmRetryFirst
	for i := 1; i < f.n && wait < warmRetryMax; i++ {
		wait *= 2
	}
	return f.at.Add(min(wait, warmRetryMax))
}

// compileCache is a sealed cache: dir holds Node's dirs at tags (paths relative to dir, each
// ending in "-<uid>" of the warm-up).
type compileCache struct {
	dir  string
	UID  int      `json:"uid"`
	Tags []string `json:"tags"`
}

// mounts binds the cache's dirs read-only into a sandbox whose processes run as uid.
func (c *compileCache) mounts(uid int) []mount {
	out := make([]mount, 0, len(c.Tags))
	suffix := "-" + strconv.Itoa(c.UID)
	for _, t := range c.Tags {
		dst := strings.TrimSuffix(t, suffix) + "-" + strconv.Itoa(uid)
		out = append(out, mount{src: filepath.Join(c.dir, t), dst: filepath.Join(sandboxCompileCache, dst)})
	}
	return out
}

// compileCacheRoot is where the sealed caches live.
func (r *Runtime) compileCacheRoot() string {
	if r.opts.CompileCacheDir != "" {
		return r.opts.CompileCacheDir
	}
	return filepath.Join(r.opts.StateDir, compileCacheDirName)
}

// compileCacheKey names an engine dir's cache: its name and a hash of where it really is and
// of the version it reports (so a reinstall in place gets a cache of its own). Empty while
// the version is not known yet.
func (r *Runtime) compileCacheKey(engineDir string) string {
	v := r.cachedVersion(engineDir, "")
	if v == "" {
		return ""
	}
	real, err := filepath.EvalSymlinks(engineDir)
	if err != nil {
		real = filepath.Clean(engineDir)
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(real + "\x00" + v))
	name := strings.Map(func(c rune) rune {
		if c == '.' || c == '-' || c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') {
			return c
		}
		return '_'
	}, filepath.Base(real))
	return fmt.Sprintf("%s-%016x", name, h.Sum64())
}

// sealedCompileCache is engineDir's sealed cache, nil when there is none (yet).
func (r *Runtime) sealedCompileCache(engineDir string) *compileCache {
	r.ccMu.Lock()
	defer r.ccMu.Unlock()
	if c, ok := r.ccReady[engineDir]; ok {
		return c
	}
	key := r.compileCacheKey(engineDir)
	if key == "" {
		return nil
	}
	c, err := loadCompileCache(filepath.Join(r.compileCacheRoot(), key))
	if err != nil {
		return nil
	}
	r.ccReady[engineDir] = c
	return c
}

func loadCompileCache(dir string) (*compileCache, error) {
	b, err := os.ReadFile(filepath.Join(dir, compileCacheManifest))
	if err != nil {
		return nil, err
	}
	c := &compileCache{dir: dir}
	if err := json.Unmarshal(b, c); err != nil {
		return nil, err
	}
	for _, t := range c.Tags {
		if !filepath.IsLocal(t) {
			return nil, fmt.Errorf("compile cache %s: bad dir %q", dir, t)
		}
	}
	return c, nil
}

// compileCacheMounts is what a sandbox of engineDir whose processes run as uid binds of the
// engine's compile cache. A gateway start (warm) of an engine whose cache is not sealed yet
// has it warmed in the background.
func (r *Runtime) compileCacheMounts(engineDir string, uid int, warm bool) []mount {
	if c := r.sealedCompileCache(engineDir); c != nil {
		return c.mounts(uid)
	}
	if warm {
		r.warmCompileCacheLater(engineDir)
	}
	return nil
}

// warmCompileCacheLater starts engineDir's warm-up unless it runs, failed lately or the
// runtime is shutting down.
func (r *Runtime) warmCompileCacheLater(engineDir string) <-chan struct{} {
	r.ccMu.Lock()
	defer r.ccMu.Unlock()
	if done, ok := r.ccWarming[engineDir]; ok {
		return done
	}
	done := make(chan struct{})
	if f, failed := r.ccFail[engineDir]; (failed && time.Now().Before(f.retryAt())) || r.ccCtx.Err() != nil {
		close(done)
		return done
	}
	r.ccWarming[engineDir] = done
	r.ccWG.Add(1)
	go func() {
		defer r.ccWG.Done()
		c, err := r.warmCompileCache(r.ccCtx, engineDir)
		r.ccMu.Lock()
		delete(r.ccWarming, engineDir)
		if err != nil {
			f := warmFailure{at: time.Now(), n: r.ccFail[engineDir].n + 1}
			r.ccFail[engineDir] = f
			r.opts.Log.Error(err, "cannot warm the engine's compile cache; sandboxed gateways compile the engine at each start",
				"engineDir", engineDir, "failures", f.n, "retryAt", f.retryAt())
		} else {
			delete(r.ccFail, engineDir)
			r.ccReady[engineDir] = c
			r.opts.Log.Info("the engine's compile cache is warm", "engineDir", engineDir, "dir", c.dir, "nodeDirs", len(c.Tags))
		}
		r.ccMu.Unlock()
		close(done)
	}()
	return done
}

// WarmCompileCache makes sure the compile cache of the engine of version is sealed, warming
// it now if need be (a gateway boot), and waits for that. Gateway starts do the same in the
// background; this is for callers that want the cache before the first one (benchmarks).
// It is a no-op when the runtime does not sandbox.
func (r *Runtime) WarmCompileCache(ctx context.Context, version string) error {
	dir := r.opts.EngineDirs[version]
	if dir == "" {
		return fmt.Errorf("no engine dir for version %q", version)
	}
	if r.sbx == nil {
		return nil
	}
	if r.cachedVersion(dir, "") == "" {
		home, err := os.MkdirTemp("", "agentplane-engine-version-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(home)
		if r.sbx.root {
			uid, err := r.sbx.uids.of(home)
			if err != nil {
				return err
			}
			defer r.sbx.uids.release(home)
			if err := os.Chown(home, uid, uid); err != nil {
				return err
			}
		}
		r.engineVersion(ctx, dir, home, "")
	}
	for range 2 {
		if r.sealedCompileCache(dir) != nil {
			return nil
		}
		select {
		case <-r.warmCompileCacheLater(dir):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return errors.New("the engine's compile cache could not be warmed (see the runtime's log)")
}

// warmCompileCache boots one gateway of engineDir in a sandbox of its own with a staging dir
// as its compile cache, stops it once ready, seals the staging dir and moves it in place.
func (r *Runtime) warmCompileCache(ctx context.Context, engineDir string) (*compileCache, error) {
	key := r.compileCacheKey(engineDir)
	if key == "" {
		return nil, errors.New("the engine's version is not known")
	}
	root := r.compileCacheRoot()
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, err
	}
	reapDeadWarmUps(root, r.opts.Log)
	staging, err := os.MkdirTemp(root, warmingPrefix+key+"-")
	if err != nil {
		return nil, err
	}
	lock, err := tryLock(staging, os.O_RDONLY) // held while the warm-up runs: reapDeadWarmUps
	if err != nil {
		_ = archive.RemoveAll(staging)
		return nil, err
	}
	defer func() {
		_ = archive.RemoveAll(staging)
		_ = lock.Close()
	}()
	home, cache := filepath.Join(staging, homeDirName), filepath.Join(staging, "cache")
	if err := r.freshHome(home, randomHex(24)); err != nil {
		return nil, err
	}
	if err := os.Mkdir(cache, 0o700); err != nil {
		return nil, err
	}
	spec := sandboxSpec{home: home, dir: home, binary: engineBinary(engineDir), uid: warmUID, dieWithParent: true,
		readOnly: append([]string{engineDir}, r.opts.ReadOnlyPaths...),
		mounts:   []mount{{src: cache, dst: sandboxCompileCache, rw: true}}}
	if spec.net, err = r.gatewayHelper(home); err != nil {
		return nil, err
	}
	uid := r.sbx.uidOf(spec)
	if r.sbx.root {
		for _, p := range []string{home, cache} {
			if err := ownTree(p, ".", uid); err != nil {
				return nil, err
			}
		}
	}
	if err := r.bootAndStop(ctx, engineDir, spec, filepath.Join(staging, logFileName)); err != nil {
		return nil, err
	}
	c, err := sealCompileCache(cache, uid)
	if err != nil {
		return nil, err
	}
	final := filepath.Join(root, key)
	if err := os.Rename(cache, final); err != nil {
		// Sealed meanwhile by another runtime sharing CompileCacheDir: use that one.
		if existing, lerr := loadCompileCache(final); lerr == nil {
			return existing, nil
		}
		return nil, err
	}
	c.dir = final
	return c, nil
}

// bootAndStop runs the engine's gateway as spec says on a port of its own until it is ready,
// then stops it (SIGTERM: the engine exits as it does on a stop, and Node writes its cache).
func (r *Runtime) bootAndStop(ctx context.Context, engineDir string, spec sandboxSpec, logPath string) error {
	// The warm-up dies with the manager (Pdeathsig, which follows the forking OS thread):
	// this goroutine holds its thread until the warm-up is stopped.
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	key := types.NamespacedName{Namespace: memberNamespace, Name: "compile-cache-" + randomHex(4)}
	port, err := r.allocatePort(key, 0)
	if err != nil {
		return err
	}
	defer func() {
		r.mu.Lock()
		r.releasePortsLocked(key)
		r.mu.Unlock()
	}()
	e := r.opts.Engine
	gc := e.GatewayCommand(engine.GatewayParams{Port: port, Bind: "loopback"})
	spec.args = gc.Args
	bin, args := r.sbx.wrap(spec)
	// The marker (a home in the staging dir) lets a later manager find a warm-up this one
	// left when it died (reapDeadWarmUps).
	env := mergeEnv(baseEnv(engineDir), r.nodeEnv(), e.Env(spec.home, port), gc.Env, map[string]string{MarkerEnv: spec.home})
	p, err := startProcess(launch{binary: bin, args: args, env: env,
		dir: spec.home, logPath: logPath, sandboxed: true, dieWithManager: spec.dieWithParent})
	if err != nil {
		return err
	}
	// A warm-up given up (the manager stopping, a boot that failed) leaves no cache worth
	// writing: it is killed at once (a done context), not given warmStopTimeout.
	defer func() {
		abandon, cancel := context.WithCancel(context.Background())
		cancel()
		stopProcess(abandon, p, 0, nil)
	}()
	stopTimeout := max(r.opts.StopTimeout, warmStopTimeout)
	if err := r.plumbNet(p, port, port, spec.home); err != nil {
		return err
	}
	url := endpoint(port)
	deadline := time.Now().Add(r.opts.StartTimeout)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-p.exited:
			return fmt.Errorf("the warm-up gateway exited with %s (log: %s)", p.exitDesc, logPath)
		case <-time.After(r.opts.HealthInterval):
		}
		hctx, cancel := context.WithTimeout(ctx, healthTimeout)
		err := r.ready(hctx, url)
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the warm-up gateway was not ready within %s", r.opts.StartTimeout)
		}
	}
	stopProcess(ctx, p, stopTimeout, &r.opts.Log)
	if p.exitCode != 0 {
		return fmt.Errorf("the warm-up gateway stopped with %s", p.exitDesc)
	}
	return nil
}

// sealCompileCache gives what the warm-up (uid) left in dir to the manager, readable by all
// and writable by none but it, removes whatever is not a plain file or dir, and writes the
// manifest of Node's dirs (those named "v<node version>-...-<uid>").
func sealCompileCache(dir string, uid int) (*compileCache, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	c := &compileCache{dir: dir, UID: uid, Tags: []string{}}
	me := os.Geteuid()
	suffix := "-" + strconv.Itoa(uid)
	var drop []string
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		mode := fs.FileMode(0o644)
		switch {
		case d.IsDir():
			mode = 0o755
			if n := d.Name(); p != "." && strings.HasPrefix(n, "v") && strings.HasSuffix(n, suffix) {
				c.Tags = append(c.Tags, p)
			}
		case !d.Type().IsRegular():
			drop = append(drop, p)
			return nil
		}
		if err := root.Lchown(p, me, me); err != nil && !errors.Is(err, syscall.EPERM) {
			return err
		}
		return root.Chmod(p, mode)
	})
	if err != nil {
		return nil, err
	}
	for _, p := range drop {
		if err := root.Remove(p); err != nil {
			return nil, err
		}
	}
	b, _ := json.Marshal(c)
	if err := root.WriteFile(compileCacheManifest, b, 0o644); err != nil {
		return nil, err
	}
	return c, nil
}
