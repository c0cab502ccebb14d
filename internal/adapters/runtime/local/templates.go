package local

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/types"

	"github.com/agentplane/agentplane/internal/adapters/engine"
)

// Gateways born from a template. For each engine install (and the rendering of its gateway:
// command line, environment, hooks, kernel, CRIU), the runtime boots one gateway on a blank
// home with a token of its own, waits until it is ready and idle, freezes it (template.mjs)
// and dumps it with CRIU: the template. A new agent's gateway is then a copy: the template's
// home copied into the agent's, the image restored in the agent's own sandbox (its network
// namespace, its cgroup, its uid: template_image.go rewrites the image's owner), thawed
// (each process reseeds its randomness) and given the agent's config as a pool member is
// (the engine applies it live). A copy takes about a second where a boot takes about 20 s of
// CPU.
//
// A template holds no tenant's data nor any secret but its own token, which the copy's bind
// replaces: agents with secrets of their own (Desired.Env) start cold, as with the warm pool.
const (
	// templateHome is where a template's sandbox, and each copy's, shows the home.
	templateHome = "/home/node"
	// templatePort is the port a template's gateway, and each copy's, listens on in its
	// network namespace (each copy has one of its own; the door on the host is the agent's).
	templatePort = 18789
	// templateMetaName is a ready template's description, written last.
	templateMetaName = "template.json"
	// templateRetry is how long a template that failed to build is not tried again.
	templateRetry = 10 * time.Minute
)

// templateMeta describes a ready template (template.json).
type templateMeta struct {
	Key       string `json:"key"`
	Version   string `json:"version"`
	EngineDir string `json:"engineDir"`
	// UID is the sandbox uid the template ran as (its image's owner, rewritten per copy).
	UID int `json:"uid"`
	// Procs is how many Node processes were frozen (each copy thaws as many).
	Procs int `json:"procs"`
	// Token is the template gateway's own token (random; no agent's).
	Token string `json:"token"`
	// Took is how long the build took.
	Took string `json:"took"`
}

// Files of a template's dir: its home as dumped, its image, its root skeleton, the FIFOs of
// its hooks and its log.
const (
	tplHome  = "home"
	tplImage = "image"
	tplRoot  = "root"
	tplRun   = "run"
	tplLog   = "gateway.log"
)

// templateState is what the runtime knows of one engine install's template.
type templateState struct {
	meta     *templateMeta // nil until ready
	building bool
	why      string    // why there is none (a copy's status says it)
	failedAt time.Time // the last build that failed
}

// templatesDir is where templates are kept (Options.TemplateDir, else <StateDir>/templates).
func (r *Runtime) templatesDir() string {
	if r.opts.TemplateDir != "" {
		return r.opts.TemplateDir
	}
	return filepath.Join(r.opts.StateDir, "templates")
}

// templatesOff says why this runtime makes no templates ("" when it does).
func (r *Runtime) templatesOff() string {
	switch {
	case !r.opts.Templates:
		return "gateway templates are off (--gateway-templates)"
	case r.ckpt == nil:
		return "this runtime does not checkpoint gateways (" + r.noCheckpoint + ")"
	case r.sbx == nil || !r.sbx.root || !r.netns:
		return "templates need the sandbox as root with a network namespace per agent"
	case r.reseed == "":
		return "no reseed addon (" + ReseedName + " beside agentplane or in " + ReseedEnv + "; make sandbox-packages builds it)"
	}
	return ""
}

// Templates reports whether new agents' gateways are born from their engine's template and,
// when not, why (off, or this host cannot: no CRIU, not root, no reseed addon).
func (r *Runtime) Templates() (bool, string) {
	why := r.templatesOff()
	return why == "", why
}

// template is the ready template of the engine install, or nil and why there is none; a
// missing or stale one is built in the background (the caller starts cold meanwhile).
func (r *Runtime) template(version, engineDir string) (*templateMeta, string) {
	if why := r.templatesOff(); why != "" {
		return nil, why
	}
	key := r.templateKey(version, engineDir)
	r.tplMu.Lock()
	defer r.tplMu.Unlock()
	t := r.tpls[engineDir]
	if t == nil {
		t = &templateState{}
		r.tpls[engineDir] = t
	}
	if t.meta != nil && t.meta.Key == key {
		return t.meta, ""
	}
	if m, err := readTemplateMeta(r.templateDir(key)); err == nil && m.Key == key {
		t.meta = m
		return m, ""
	}
	t.meta = nil
	switch {
	case t.building:
		return nil, "the engine's template is being made"
	case !t.failedAt.IsZero() && time.Since(t.failedAt) < templateRetry:
		return nil, t.why
	case r.ccCtx.Err() != nil:
		return nil, errShutdown.Error()
	}
	t.building, t.why = true, "the engine's template is being made"
	r.ccWG.Add(1)
	go func() {
		defer r.ccWG.Done()
		m, err := r.buildTemplate(r.ccCtx, key, version, engineDir)
		r.tplMu.Lock()
		defer r.tplMu.Unlock()
		t.building = false
		if err != nil {
			t.why, t.failedAt = "the engine's template could not be made: "+err.Error(), time.Now()
			r.opts.Log.Info("cannot make the engine's template: new agents start cold", "engineDir", engineDir, "error", err.Error())
			return
		}
		t.meta, t.failedAt = m, time.Time{}
		r.opts.Log.Info("engine template ready", "engineDir", engineDir, "took", m.Took)
	}()
	return nil, t.why
}

// templateDir is the dir of the template with key.
func (r *Runtime) templateDir(key string) string { return filepath.Join(r.templatesDir(), key) }

// templateKey names a template by everything its image depends on: the engine install and
// version, the gateway's command line and environment as a template runs them, the hooks,
// this kernel, the CRIU and the reseed addon. Any change makes another template.
func (r *Runtime) templateKey(version, engineDir string) string {
	h := sha256.New()
	gc := r.opts.Engine.GatewayCommand(engine.GatewayParams{Port: templatePort, Bind: "loopback"})
	fmt.Fprintln(h, version, engineDir, strings.Join(gc.Args, "\x00"), strings.Join(r.templateGatewayEnv(engineDir, ""), "\x00"))
	var u unix.Utsname
	_ = unix.Uname(&u)
	fmt.Fprintln(h, unix.ByteSliceToString(u.Release[:]), unix.ByteSliceToString(u.Version[:]))
	for _, p := range []string{r.ckpt.criu, r.reseed, engineBinary(engineDir), r.opts.CAFile} { // Node reads its CAs at start
		if st, err := os.Stat(p); err == nil {
			fmt.Fprintln(h, p, st.Size(), st.ModTime().UnixNano())
		}
	}
	// Not HostServices: the manager serves them in each copy's namespace after its restore.
	fmt.Fprintln(h, r.opts.ReadOnlyPaths, tiniArgs)
	return version + "-" + hex.EncodeToString(h.Sum(nil))[:16]
}

// templateGatewayEnv is the environment of a template's gateway (of home, "" in the key).
func (r *Runtime) templateGatewayEnv(engineDir, home string) []string {
	e := r.opts.Engine
	gc := e.GatewayCommand(engine.GatewayParams{Port: templatePort, Bind: "loopback"})
	node := r.nodeEnv()
	return mergeEnv(baseEnv(engineDir), node, r.egressEnv(), e.Env(templateHome, templatePort), gc.Env,
		templateEnv(node["NODE_OPTIONS"]), map[string]string{MarkerEnv: home})
}

func readTemplateMeta(dir string) (*templateMeta, error) {
	b, err := os.ReadFile(filepath.Join(dir, templateMetaName))
	if err != nil {
		return nil, err
	}
	var m templateMeta
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// buildTemplate boots the template gateway of the engine install in <templates>/<key>.tmp,
// freezes and dumps it, and moves it to <templates>/<key>.
func (r *Runtime) buildTemplate(ctx context.Context, key, version, engineDir string) (*templateMeta, error) {
	start := time.Now()
	final := r.templateDir(key)
	// A dir of its own: runtimes sharing the templates' dir may make the same one at once.
	if err := os.MkdirAll(r.templatesDir(), 0o700); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(r.templatesDir(), key+".tmp-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	home, run := filepath.Join(dir, tplHome), filepath.Join(dir, tplRun)
	m := &templateMeta{Key: key, Version: version, EngineDir: engineDir, Token: randomHex(24)}
	if err := r.freshHome(home, m.Token); err != nil {
		return nil, err
	}
	uid, err := r.sbx.uids.of(home)
	if err != nil {
		return nil, err
	}
	defer r.sbx.uids.release(home)
	m.UID = uid
	if err := makeTemplateDir(run, uid); err != nil {
		return nil, err
	}
	p, args, port, err := r.startTemplate(ctx, m, dir)
	if err != nil {
		return nil, err
	}
	owner := templateOwner(key)
	defer r.releasePorts(owner)
	defer stopProcess(context.Background(), p, 0, nil)
	if err := r.waitTemplateReady(ctx, p, port, m.Token); err != nil {
		return nil, fmt.Errorf("the template gateway did not become ready: %w (%s)", err, lastLines(readTail(filepath.Join(dir, tplLog)), 3))
	}
	init := sandboxInit(p.pid)
	if init.pid == 0 {
		return nil, errors.New("the template gateway's sandbox has no init")
	}
	if !settle(ctx, init.pid, settleQuiet, settleBound, settleCPU, nil) {
		return nil, fmt.Errorf("the template gateway stayed busy for %s", settleBound)
	}
	if err := r.planForget(run, init.pid); err != nil {
		return nil, err
	}
	if m.Procs, err = freezeNodeTree(ctx, init.pid, run); err != nil {
		return nil, err
	}
	// Each copy starts its own log: the image must not expect the template's.
	if err := os.Truncate(filepath.Join(dir, tplLog), 0); err != nil {
		return nil, err
	}
	if err := r.ckpt.dumpTemplate(ctx, init.pid, filepath.Join(dir, tplImage), filepath.Join(dir, tplRoot), args); err != nil {
		return nil, err
	}
	init.killAndWait()
	m.Took = time.Since(start).Round(time.Millisecond).String()
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, templateMetaName), b, 0o600); err != nil {
		return nil, err
	}
	return publishTemplate(dir, final, m)
}

// publishTemplate moves the template made in dir to final, unless another runtime sharing
// the templates' dir published the same one first (then that one is used).
func publishTemplate(dir, final string, m *templateMeta) (*templateMeta, error) {
	if other, err := readTemplateMeta(final); err == nil && other.Key == m.Key {
		return other, nil
	}
	if err := os.RemoveAll(final); err != nil { // an unfinished or unreadable one
		return nil, err
	}
	if err := os.Rename(dir, final); err != nil {
		if other, rerr := readTemplateMeta(final); rerr == nil && other.Key == m.Key {
			return other, nil
		}
		return nil, err
	}
	return m, nil
}

// templateOwner is the port owner of a template being made.
func templateOwner(key string) types.NamespacedName {
	return types.NamespacedName{Namespace: "agentplane-template", Name: key}
}

// startTemplate starts the template gateway of m in dir and returns it, its sandbox's bwrap
// arguments and its door's port.
func (r *Runtime) startTemplate(ctx context.Context, m *templateMeta, dir string) (*process, []string, int, error) {
	home := filepath.Join(dir, tplHome)
	port, err := r.allocatePort(templateOwner(m.Key), 0)
	if err != nil {
		return nil, nil, 0, err
	}
	r.engineVersion(ctx, m.EngineDir, home, m.Version)
	gc := r.opts.Engine.GatewayCommand(engine.GatewayParams{Port: templatePort, Bind: "loopback"})
	spec := sandboxSpec{home: home, homeAt: templateHome, dir: templateHome, binary: engineBinary(m.EngineDir), args: gc.Args,
		template:   &sandboxTemplate{dir: filepath.Join(dir, tplRun), reseed: r.reseed},
		checkpoint: &checkpointSpec{tini: r.ckpt.tini, log: filepath.Join(dir, tplLog)}}
	bin, args, err := r.inSandbox(spec, m.EngineDir, true)
	if err != nil {
		return nil, nil, 0, err
	}
	p, err := startProcess(launch{binary: bin, args: args, env: r.templateGatewayEnv(m.EngineDir, home), dir: home,
		logPath: filepath.Join(dir, tplLog), sandboxed: true, dieWithManager: true})
	if err != nil {
		return nil, nil, 0, err
	}
	if err := r.attach(p, port, templatePort, home); err != nil {
		stopProcess(context.Background(), p, 0, nil)
		return nil, nil, 0, err
	}
	_, args = cgroupUnwrap(bin, args)
	return p, args, port, nil
}

// waitTemplateReady waits until the template gateway is ready and accepts its token.
func (r *Runtime) waitTemplateReady(ctx context.Context, p *process, port int, token string) error {
	ctx, cancel := context.WithTimeout(ctx, r.opts.StartTimeout)
	defer cancel()
	m := &member{port: port, token: token, proc: p}
	for {
		err := r.memberHealth(ctx, m, endpoint(port), false)
		if err == nil {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("it exited with %s", p.exitDesc)
		case <-ctx.Done():
			return err
		case <-time.After(r.opts.HealthInterval):
		}
	}
}

// templateMounts are the mounts of a template's sandbox that a copy takes from its agent:
// where the sandbox shows each, and the name the image gives it (CRIU's external mounts).
var templateMounts = [][2]string{{templateHome, "home"}, {templateRunDir, "run"}, {sandboxLog, "log"}}

// dumpTemplate dumps a frozen template's sandbox (dump) with its home, hooks' dir and log as
// named mounts, and its clocks held: each copy's go on from the dump (checkpoint_clock.go).
func (c *checkpointer) dumpTemplate(ctx context.Context, init int, images, root string, args []string) error {
	var extra []string
	for _, m := range templateMounts {
		extra = append(extra, "--external", "mnt["+m[0]+"]:"+m[1])
	}
	return c.dump(ctx, init, images, root, args, clockHeld, extra...)
}

// TemplateReady reports whether the template of the engine version is ready to give new
// agents their gateways and, when it is not, why; a missing or stale one is started.
func (r *Runtime) TemplateReady(version string) (bool, string) {
	engineDir, ok := r.opts.EngineDirs[version]
	if !ok {
		return false, "engine version " + version + " is not installed on this host"
	}
	m, why := r.template(version, engineDir)
	return m != nil, why
}
