package local

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/engine"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// Ensure implements runtime.Runtime. The first call claims a warm gateway of a pool when one is
// ready and the agent can take it (claim.go), else creates the agent's home and engine config
// and starts the gateway; later calls only act on a change: a new token is written into
// the config (the engine hot-reloads it, no restart), a new ConfigHash, EngineVersion or
// RestartNonce restarts the gateway, Stopped stops it. A crashed gateway waiting for its
// restart backoff is reported Crashed and left to the supervisor.
func (r *Runtime) Ensure(ctx context.Context, ag *agentsv1.Agent, d runtime.Desired) (runtime.Observed, error) {
	if err := r.admitTenant(ag.Namespace); err != nil {
		return runtime.Observed{}, err
	}
	a, err := r.agentFor(keyOf(ag), true)
	if err != nil {
		return runtime.Observed{}, err
	}
	if o := a.copying.Load(); o != nil {
		return *o, nil // its gateway is being born from a template (copyInBackground)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return runtime.Observed{}, errClosed
	}
	// The caller gets the observation: no need to notify it of what happens here.
	defer func() { a.pendingNotify = false }()
	engineDir, ok := r.opts.EngineDirs[d.EngineVersion]
	if !ok {
		return runtime.Observed{}, fmt.Errorf("engine version %q is not installed on this host (installed: %s)",
			d.EngineVersion, strings.Join(sortedKeys(r.opts.EngineDirs), ", "))
	}
	if err := a.loadLocked(); err != nil {
		return runtime.Observed{}, err
	}
	if o, claimed := a.claimLocked(ctx, d, engineDir); claimed {
		return o, nil // a warm gateway of a pool, bound to the agent
	}
	if o, born := a.bornFromTemplateLocked(d, ag.Spec.Resources, engineDir); born {
		return o, nil // a copy of the engine's template, being made for the agent
	}
	if err := a.coldLocked(ctx, d, ag.Spec.Resources, engineDir); err != nil {
		return runtime.Observed{}, err
	}
	return a.observedLocked(), nil
}

// coldLocked is Ensure of an agent whose gateway is not a claim nor a copy: its home and
// config made or updated, its resources applied, and its gateway started, restarted, restored
// or stopped as d says.
func (a *agent) coldLocked(ctx context.Context, d runtime.Desired, res *agentsv1.AgentResources, engineDir string) error {
	if err := a.prepareLocked(); err != nil {
		return fmt.Errorf("create agent home: %w", err)
	}
	a.env, a.token = maps.Clone(d.Env), d.GatewayToken
	heap, err := a.rt.applyResources(a.home, res)
	if err != nil {
		a.log.Info("cannot apply the agent's resources to its cgroup", "error", err.Error())
	}
	a.heapMiB = heap
	if err := a.ensureConfigLocked(d); err != nil {
		return err
	}
	if a.proc != nil && a.proc.hasExited() {
		a.handleExitLocked()
	}
	if d.Stopped {
		a.stopDesiredLocked(ctx, d)
		return nil
	}
	a.runDesiredLocked(ctx, d, engineDir)
	return nil
}

// stopDesiredLocked stops the gateway of an agent that is to be stopped: checkpointed first
// when it is suspended (unless it has a checkpoint), its checkpoint discarded when it is not.
func (a *agent) stopDesiredLocked(ctx context.Context, d runtime.Desired) {
	a.retryAt = timeZero
	if d.Suspended && !a.st.Checkpoint {
		a.checkpointLocked(ctx)
	}
	if !d.Suspended {
		a.discardCheckpointLocked()
	}
	a.stopLocked(ctx)
	if !a.st.Stopped {
		a.st.Stopped = true
		a.saveLocked()
	}
	a.setPhase(runtime.PhaseStopped, "", "")
}

// runDesiredLocked keeps the gateway of an agent that is to run running on d: it starts (or
// restores) a stopped one and restarts one whose engine, config or restart nonce changed;
// one running or starting, or crashed and waiting for its backoff, is left alone.
func (a *agent) runDesiredLocked(ctx context.Context, d runtime.Desired, engineDir string) {
	changed := a.st.EngineDir != engineDir || a.st.EngineVersion != d.EngineVersion ||
		a.st.ConfigHash != a.rt.configHash(d) || a.st.RestartNonce != d.RestartNonce
	if !changed && !a.st.Stopped {
		if a.proc != nil {
			return // running or starting: nothing to do
		}
		if a.phase == runtime.PhaseCrashed && !a.retryAt.IsZero() {
			return // the supervisor restarts it after the backoff
		}
	}
	if a.proc != nil {
		a.log.Info("restarting gateway for a new spec",
			"configHashChanged", a.st.ConfigHash != a.rt.configHash(d),
			"engineVersion", d.EngineVersion, "restartRequested", a.st.RestartNonce != d.RestartNonce)
		a.stopLocked(ctx)
	}
	if changed || a.st.Stopped {
		a.backoff = 0 // a new spec deserves a fresh start
	}
	a.retryAt = timeZero
	a.st.Stopped = false
	if changed {
		a.discardCheckpointLocked() // the checkpoint runs the former spec
	}
	a.st.EngineDir, a.st.EngineVersion = engineDir, d.EngineVersion
	a.st.ConfigHash, a.st.RestartNonce = a.rt.configHash(d), d.RestartNonce
	if a.st.Checkpoint {
		a.restoreLocked(ctx)
		return
	}
	a.startLocked(ctx)
}

// ensureConfigLocked writes the initial engine config when there is none, and the desired
// gateway token into it when it changed since the last write (compared through a hash kept in
// state.json; WriteFile of the config forgets the hash so the token is checked again).
func (a *agent) ensureConfigLocked(d runtime.Desired) error {
	e := a.rt.opts.Engine
	cfgRel := filepath.Clean(e.Layout().ConfigPath)
	want := tokenHash(d.GatewayToken)
	root, err := os.OpenRoot(a.home)
	if err != nil {
		return err
	}
	defer root.Close()
	_, err = root.Lstat(cfgRel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		cfg, err := e.InitialConfig(d.Identity, d.GatewayToken)
		if err != nil {
			return fmt.Errorf("initial engine config: %w", err)
		}
		if err := writeHomeFile(root, cfgRel, cfg, 0o600, nil); err != nil {
			return fmt.Errorf("write engine config: %w", homeErr(err))
		}
		a.rt.own(a.home, a.home)
	case err != nil:
		return fmt.Errorf("engine config: %w", homeErr(err))
	case a.st.TokenHash == want:
		return nil
	default:
		cur, err := root.ReadFile(cfgRel)
		if err != nil {
			return fmt.Errorf("read engine config: %w", homeErr(err))
		}
		next, err := e.SetGatewayToken(cur, d.GatewayToken)
		if errors.Is(err, engine.ErrInvalidConfig) {
			// A file the engine cannot read (edited by hand) is the Agent controller's to
			// report and render anew; the token is set on the next Ensure after that.
			a.log.Info("the engine config cannot be read: the gateway token is set once it can", "error", err.Error())
			return nil
		}
		if err != nil {
			return fmt.Errorf("set the gateway token in the engine config: %w", err)
		}
		if !bytes.Equal(cur, next) {
			if err := a.rt.writeOwned(a.home, cfgRel, next, 0o600); err != nil {
				return fmt.Errorf("write engine config: %w", homeErr(err))
			}
			a.log.Info("gateway token written to the engine config")
		}
	}
	a.st.TokenHash = want
	a.saveLocked()
	return nil
}

// startLocked starts the gateway with what a.st says (engine dir, port preference). On
// failure the agent is Crashed and a restart is scheduled.
func (a *agent) startLocked(ctx context.Context) {
	port, err := a.rt.allocatePort(a.key, a.st.Port)
	if err != nil {
		a.crashedLocked(timeZero, agentsv1.ReasonGatewayStartFailed, "cannot start the gateway: "+err.Error())
		return
	}
	a.st.Port = port
	e := a.rt.opts.Engine
	a.rt.engineVersion(ctx, a.st.EngineDir, a.home, a.st.EngineVersion) // cached for observedLocked
	homeAt, inner := a.st.inSandbox()
	gc := e.GatewayCommand(engine.GatewayParams{Port: inner, Bind: "loopback"})
	// The attached secrets first: every value the platform sets (PATH, LANG, HOME, OPENCLAW_*,
	// NODE_OPTIONS, the marker) comes after them and wins, even for a name that slipped past
	// the reserved list.
	env := mergeEnv(a.env, baseEnv(a.st.EngineDir), a.rt.nodeEnvFor(a.heapMiB), a.rt.egressEnv(), e.Env(cmp.Or(homeAt, a.home), inner), gc.Env, map[string]string{MarkerEnv: a.home})
	bin, args, err := a.gatewaySandboxLocked(true)
	if err != nil {
		a.crashedLocked(timeZero, agentsv1.ReasonGatewayStartFailed, "cannot start the gateway: "+err.Error())
		return
	}
	l := launch{binary: bin, args: args, env: env, dir: a.home, logPath: filepath.Join(a.dir, logFileName), sandboxed: a.rt.sbx != nil,
		merge: a.rt.opts.MemoryMerge}
	authored := a.configDigest()
	p, err := startProcess(l)
	if err == nil {
		p.authored = authored
		if err = a.rt.attach(p, port, inner, a.home); err != nil && p.hasExited() {
			// It ended before its sandbox could be served (an engine that fails at once, on
			// a machine too busy to see its sandbox first): that is its exit, which the
			// supervisor reports as any gateway's (GatewayCrashed, with its log), not a
			// failure of the platform to start it (a facade test saw the latter on a loaded
			// machine, 2026-12-06).
			err = nil
		} else if err != nil {
			stopProcess(ctx, p, 0, &a.log)
		}
	}
	if err != nil {
		a.crashedLocked(timeZero, agentsv1.ReasonGatewayStartFailed, "cannot start the gateway: "+err.Error())
		return
	}
	a.proc, a.unhealthy = p, 0
	a.st.PID, a.st.StartTime = p.pid, p.start
	a.saveLocked()
	a.setPhase(runtime.PhaseStarting, "", "")
	a.startedCold, a.coldWhy = a.coldWhy, ""
	if a.startedCold != "" {
		a.setPhase(runtime.PhaseStarting, agentsv1.ReasonGatewayTemplateUnavailable, "the gateway starts cold: "+a.startedCold)
	}
	a.since = p.started // a new gateway starts anew (StartTimeout counts from here)
	a.log.Info("gateway started", "pid", p.pid, "port", port, "engineVersion", a.st.EngineVersion)
	a.poke()
}

// gatewaySandboxLocked is the command line of the agent's gateway: in a sandbox CRIU can
// checkpoint when the runtime checkpoints suspended gateways. own: see inSandbox.
func (a *agent) gatewaySandboxLocked(own bool) (string, []string, error) {
	homeAt, inner := a.st.inSandbox()
	gc := a.rt.opts.Engine.GatewayCommand(engine.GatewayParams{Port: inner, Bind: "loopback"})
	helper, err := a.rt.gatewayHelper(a.home)
	if err != nil {
		return "", nil, err
	}
	spec := sandboxSpec{home: a.home, homeAt: homeAt, dir: cmp.Or(homeAt, a.home), binary: engineBinary(a.st.EngineDir), args: gc.Args, net: helper}
	if a.rt.ckpt != nil {
		spec.checkpoint = &checkpointSpec{tini: a.rt.ckpt.tini, log: filepath.Join(a.dir, logFileName)}
	}
	return a.rt.inSandbox(spec, a.st.EngineDir, own)
}

// configHash is what a gateway started on d runs: d's config (engine, environment) and, when
// there is one, the platform's Options.GatewayEnv, so that a gateway started before a change
// of either restarts. Without a GatewayEnv it is d.ConfigHash().
func (r *Runtime) configHash(d runtime.Desired) string {
	if len(r.gatewayEnv) == 0 {
		return d.ConfigHash()
	}
	h := sha256.New()
	h.Write([]byte(d.ConfigHash()))
	for _, kv := range mergeEnv(r.gatewayEnv) {
		h.Write([]byte{0})
		h.Write([]byte(kv))
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// Base environment of every process: nothing of the manager's own environment but PATH (with
// the engine's bin dir first, for node and npm) and LANG.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

func baseEnv(engineDir string) map[string]string {
	path := os.Getenv("PATH")
	if path == "" {
		path = defaultPath
	}
	if engineDir != "" {
		path = filepath.Join(engineDir, "bin") + string(os.PathListSeparator) + path
	}
	lang := os.Getenv("LANG")
	if lang == "" {
		lang = "C.UTF-8"
	}
	return map[string]string{"PATH": path, "LANG": lang}
}

// mergeEnv merges maps (later ones win) into a sorted KEY=VALUE list.
func mergeEnv(maps ...map[string]string) []string {
	all := map[string]string{}
	for _, m := range maps {
		for k, v := range m {
			if k != "" && !strings.ContainsAny(k, "=\x00") {
				all[k] = v
			}
		}
	}
	out := make([]string, 0, len(all))
	for _, k := range sortedKeys(all) {
		out = append(out, k+"="+all[k])
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
