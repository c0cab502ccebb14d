package local

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/types"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// pipeGrace is how long output is still read after the command's process group is gone (a
// process that left the group may hold the pipes open).
const pipeGrace = 2 * time.Second

// Exec implements runtime.Runtime. The command runs in the agent's home (or req.Dir
// inside it, symlinks resolved), in its own process group, with the agent's attached secrets
// (Desired.Env of the last Ensure), the base environment, the engine environment (HOME is the
// agent's home) and req.Env, in that order of precedence (the platform's values win over the
// secrets). With req.Engine, Argv are
// engine CLI arguments; otherwise Argv[0] is looked up in that PATH (engine bin dir first).
// The timeout kills the whole group; output beyond MaxOutput per stream is dropped.
func (r *Runtime) Exec(ctx context.Context, ag *agentsv1.Agent, req runtime.ExecRequest) (runtime.ExecResult, error) {
	key := keyOf(ag)
	dir := r.AgentDir(key)
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		return runtime.ExecResult{}, fmt.Errorf("%w: %v", runtime.ErrNotRunning, errShutdown)
	}
	st, secrets, ns, gatewayPort := r.execContext(key, dir)
	joinNet := ""
	if ns != nil {
		defer ns.Close() // held until the command ended (nsenter opened it by number)
		joinNet = nsPath(ns)
	}
	cn, err := r.execNet(key, dir, ns, gatewayPort, req.Network)
	if err != nil {
		return runtime.ExecResult{}, err
	}
	if cn != nil {
		defer cn.close()
	}
	home := homeOf(dir, st)
	if _, err := os.Stat(home); err != nil {
		return runtime.ExecResult{}, fmt.Errorf("%w: agent %s has no home on this host", runtime.ErrNotRunning, key)
	}
	if len(req.Argv) == 0 {
		return runtime.ExecResult{}, fmt.Errorf("%w: empty command", runtime.ErrExec)
	}
	ws, err := r.ensureWorkspace(home)
	if err != nil {
		return runtime.ExecResult{}, err
	}
	cwd, err := resolveDir(home, ws, req.Dir)
	if err != nil {
		return runtime.ExecResult{}, err
	}
	engineDir := st.EngineDir
	if engineDir == "" {
		engineDir = r.engineDirFor(ag)
	}
	homeAt, env := r.execEnv(st, home, engineDir, secrets, req.Env)
	path, args := req.Argv[0], req.Argv[1:]
	if req.Engine {
		if engineDir == "" {
			return runtime.ExecResult{}, fmt.Errorf("%w: no engine installed for agent %s", runtime.ErrExec, key)
		}
		path, args = engineBinary(engineDir), req.Argv
	}
	if req.StdinFile != nil {
		argv, err := runtime.WrapStdinFile(req.StdinFile, append([]string{path}, args...))
		if err != nil {
			return runtime.ExecResult{}, err
		}
		path, args = argv[0], argv[1:]
	}
	bin, err := lookPath(path, env)
	if err != nil {
		return runtime.ExecResult{}, fmt.Errorf("%w: %v", runtime.ErrExec, err)
	}
	if !filepath.IsAbs(bin) {
		bin = filepath.Join(cwd, bin)
	}
	if info, err := os.Stat(bin); err != nil || info.IsDir() {
		return runtime.ExecResult{}, fmt.Errorf("%w: %s: not an executable file", runtime.ErrExec, req.Argv[0])
	}
	spec := sandboxSpec{home: home, homeAt: homeAt, dir: sandboxPath(home, homeAt, cwd), binary: sandboxPath(home, homeAt, bin), args: args, dieWithParent: true, joinNet: joinNet}
	if cn != nil {
		spec.net = cn.spec
	}
	bin, args, err = r.inSandbox(spec, engineDir, false)
	if err != nil {
		return runtime.ExecResult{}, fmt.Errorf("%w: %v", runtime.ErrExec, err)
	}
	return runCommand(ctx, commandSpec{
		path: bin, args: args, dir: cwd, env: env, stdin: req.Stdin, sandboxed: r.sbx != nil,
		timeout: req.Timeout, maxOutput: req.MaxOutput, started: r.trackExec(key), net: cn,
	})
}

// execNet is the network namespace of an ordinary user's command, a namespace of its own
// served as its gateway's is (netns.go; nil: none, as root the command joins ns). A command
// that needs the network (network) and would get none, its gateway not running, is refused.
func (r *Runtime) execNet(key types.NamespacedName, dir string, ns *os.File, gatewayPort int, network bool) (*commandNet, error) {
	var cn *commandNet
	if ns == nil && gatewayPort != 0 && r.netns && r.sbx.helper != "" {
		var err error
		if cn, err = r.newCommandNet(dir, gatewayPort); err != nil {
			return nil, fmt.Errorf("%w: %v", runtime.ErrExec, err)
		}
	}
	if network && r.netns && ns == nil && cn == nil {
		return nil, fmt.Errorf("%w: agent %s's gateway is not running: a command that needs the network runs in its network namespace", runtime.ErrNotRunning, key)
	}
	return cn, nil
}

// execContext is the agent's state, attached secrets (none before the first Ensure of this
// manager), its running gateway's network namespace for its commands to join (nil: none, or
// one the manager cannot enter; the caller closes it) and, when that gateway's namespace is
// served, its port (0: none).
func (r *Runtime) execContext(key types.NamespacedName, dir string) (state, map[string]string, *os.File, int) {
	r.mu.Lock()
	a := r.agents[key]
	r.mu.Unlock()
	if a == nil {
		st, _ := readState(dir)
		return st, nil, nil, 0
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	_ = a.loadLocked()
	var ns *os.File
	port := 0
	if a.proc != nil {
		ns = a.proc.netNS()
		if a.proc.netServed() {
			port = a.st.Port
		}
	}
	return a.st, maps.Clone(a.env), ns, port
}

// engineDirFor is the engine dir for an agent that never ran here: its version's, or the
// only one installed.
func (r *Runtime) engineDirFor(ag *agentsv1.Agent) string {
	if d, ok := r.opts.EngineDirs[ag.Spec.Engine.Version]; ok {
		return d
	}
	if len(r.opts.EngineDirs) == 1 {
		for _, d := range r.opts.EngineDirs {
			return d
		}
	}
	return ""
}

// execEnv is where a command of an agent with state st sees its home (homeAt; "": at home)
// and its environment: the attached secrets, then the platform's values, then req's.
func (r *Runtime) execEnv(st state, home, engineDir string, secrets, reqEnv map[string]string) (string, []string) {
	homeAt, inner := st.inSandbox()
	seen := cmp.Or(homeAt, home)
	return homeAt, mergeEnv(secrets, baseEnv(engineDir), map[string]string{"HOME": seen}, r.egressEnv(), r.opts.Engine.Env(seen, inner), reqEnv)
}

// resolveDir resolves rel (relative, "" = root) inside root, the workspace of the home home,
// with symlinks followed; it must exist, be a directory and stay inside root, and root inside
// home (the agent may have made its workspace, or a dir above it, a link elsewhere), else
// runtime.ErrInvalidPath.
func resolveDir(home, root, rel string) (string, error) {
	if filepath.IsAbs(rel) {
		return "", fmt.Errorf("%w: %q is absolute", runtime.ErrInvalidPath, rel)
	}
	homeReal, err := filepath.EvalSymlinks(home)
	if err != nil {
		return "", fmt.Errorf("%w: the home does not exist", runtime.ErrInvalidPath)
	}
	rootReal, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", fmt.Errorf("%w: the workspace does not exist", runtime.ErrInvalidPath)
	}
	if !within(rootReal, homeReal) {
		return "", fmt.Errorf("%w: the workspace leads out of the agent's home", runtime.ErrInvalidPath)
	}
	real, err := filepath.EvalSymlinks(filepath.Join(rootReal, rel))
	if err != nil {
		return "", fmt.Errorf("%w: %q does not exist", runtime.ErrInvalidPath, rel)
	}
	if !within(real, rootReal) {
		return "", fmt.Errorf("%w: %q is outside the workspace", runtime.ErrInvalidPath, rel)
	}
	if info, err := os.Stat(real); err != nil || !info.IsDir() {
		return "", fmt.Errorf("%w: %q is not a directory", runtime.ErrInvalidPath, rel)
	}
	return real, nil
}

// commandSpec is one command to run to completion.
type commandSpec struct {
	path      string // binary; without a slash it is looked up in env's PATH
	args      []string
	dir       string
	env       []string
	stdin     []byte
	timeout   time.Duration // 0 = runtime.DefaultExecTimeout
	maxOutput int           // per stream; 0 = runtime.DefaultMaxOutput
	// sandboxed: path is bwrap, which gets the sandbox's files (sandboxFiles).
	sandboxed bool
	// started, if set, is told the process (group) id; the func it returns runs at the end.
	started func(pid int) func()
	// net, when set, serves the command's network namespace once it started (an ordinary
	// user's command whose gateway runs): the command waits for it (netGateFD).
	net *commandNet
}

// runCommand runs c in its own process group and collects its output. When the timeout
// passes or ctx ends the group is killed; whatever the command left in its group is killed
// when it exits. A non-zero exit is a result; a command that cannot start is ErrExec.
func runCommand(ctx context.Context, c commandSpec) (runtime.ExecResult, error) {
	// The child's Pdeathsig follows the OS thread that forked it: hold that thread until the
	// command is done, so that no goroutine locking it and exiting ends the thread (and the
	// command) early.
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	var res runtime.ExecResult
	if c.timeout <= 0 {
		c.timeout = runtime.DefaultExecTimeout
	}
	if c.maxOutput <= 0 {
		c.maxOutput = runtime.DefaultMaxOutput
	}
	bin, err := lookPath(c.path, c.env)
	if err != nil {
		return res, fmt.Errorf("%w: %v", runtime.ErrExec, err)
	}
	p, err := openPipes(c.stdin != nil)
	if err != nil {
		return res, fmt.Errorf("%w: %v", runtime.ErrExec, err)
	}
	// A command lives no longer than the manager that waits for it (Pdeathsig: set before
	// exec, unlike bwrap's --die-with-parent, so a manager killed meanwhile leaves none).
	cmd := &exec.Cmd{
		Path: bin, Args: append([]string{c.path}, c.args...), Env: c.env, Dir: c.dir,
		Stdout: p.outW, Stderr: p.errW, SysProcAttr: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
	}
	if p.inR != nil {
		cmd.Stdin = p.inR
		defer p.inR.Close()
	}
	if c.sandboxed {
		files, err := sandboxFiles()
		if err != nil {
			return res, fmt.Errorf("%w: %v", runtime.ErrExec, err)
		}
		if c.net != nil {
			files = append(files, c.net.gateR) // netGateFD
		}
		defer closeFiles(files)
		cmd.ExtraFiles = files
	}
	if err := p.start(cmd); err != nil {
		return res, fmt.Errorf("%w: %v", runtime.ErrExec, err)
	}
	pid := cmd.Process.Pid
	if c.net != nil {
		c.net.serve(pid) // the command waits for it; without its network it never starts
	}
	if c.started != nil {
		defer c.started(pid)()
	}
	stdout, stderr := &capped{max: c.maxOutput}, &capped{max: c.maxOutput}
	var readers sync.WaitGroup
	readers.Go(func() { _, _ = io.Copy(stdout, p.outR) })
	readers.Go(func() { _, _ = io.Copy(stderr, p.errR) })
	if p.inW != nil {
		go func() {
			_, _ = p.inW.Write(c.stdin)
			p.inW.Close()
		}()
	}

	res.TimedOut = waitCommand(ctx, cmd, pid, c.timeout)
	killGroup(pid)
	if p.inW != nil {
		p.inW.Close() // a writer stuck on a full pipe gives up
	}
	p.drain(&readers)

	res.ExitCode, _ = describeExit(cmd.ProcessState, nil)
	res.Stdout, res.Stderr = stdout.bytes(), stderr.bytes()
	res.Truncated = stdout.truncated || stderr.truncated
	if !res.TimedOut && ctx.Err() != nil {
		return res, ctx.Err()
	}
	return res, nil
}

// commandPipes are a command's stdout and stderr pipes and, when it is given input, its
// stdin's.
type commandPipes struct {
	outR, outW, errR, errW *os.File
	inR, inW               *os.File // nil without input
}

// openPipes opens the pipes (stdin's too when stdin); on an error none stays open.
func openPipes(stdin bool) (*commandPipes, error) {
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, err
	}
	p := &commandPipes{outR: outR, outW: outW, errR: errR, errW: errW}
	if stdin {
		if p.inR, p.inW, err = os.Pipe(); err != nil {
			outR.Close()
			outW.Close()
			errR.Close()
			errW.Close()
			return nil, err
		}
	}
	return p, nil
}

// start starts cmd and closes this side's copies of the command's ends of its output
// pipes; when it cannot start, the rest is closed too (stdin's read end is the caller's).
func (p *commandPipes) start(cmd *exec.Cmd) error {
	err := cmd.Start()
	p.outW.Close()
	p.errW.Close()
	if err != nil {
		p.outR.Close()
		p.errR.Close()
		if p.inW != nil {
			p.inW.Close()
		}
	}
	return err
}

// waitCommand waits for cmd to exit; when timeout passes (it says so) or ctx ends first,
// its process group is killed.
func waitCommand(ctx context.Context, cmd *exec.Cmd, pid int, timeout time.Duration) (timedOut bool) {
	waited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(waited)
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-waited:
	case <-timer.C:
		timedOut = true
		signalGroup(pid, syscall.SIGKILL)
		<-waited
	case <-ctx.Done():
		signalGroup(pid, syscall.SIGKILL)
		<-waited
	}
	return timedOut
}

// drain waits for readers to copy the output; after pipeGrace the pipes are closed under
// them (a process that left the group may hold them open).
func (p *commandPipes) drain(readers *sync.WaitGroup) {
	drained := make(chan struct{})
	go func() {
		readers.Wait()
		close(drained)
	}()
	select {
	case <-drained:
	case <-time.After(pipeGrace):
		p.outR.Close()
		p.errR.Close()
		<-drained
	}
	p.outR.Close()
	p.errR.Close()
}

// capped keeps the first max bytes written to it and counts the rest as truncated.
type capped struct {
	buf       []byte
	max       int
	truncated bool
}

func (c *capped) Write(p []byte) (int, error) {
	room := c.max - len(c.buf)
	n := min(room, len(p))
	if n > 0 {
		if len(c.buf)+n > cap(c.buf) {
			grown := make([]byte, len(c.buf), min(max(2*cap(c.buf), len(c.buf)+n, 4096), c.max))
			copy(grown, c.buf)
			c.buf = grown
		}
		c.buf = append(c.buf, p[:n]...)
	}
	if n < len(p) {
		c.truncated = true
	}
	return len(p), nil
}

func (c *capped) bytes() []byte {
	if c.buf == nil {
		return []byte{}
	}
	return c.buf
}

// lookPath finds file in the PATH of env (the command's, not the manager's). A name with a
// slash is used as it is (relative to the working directory).
func lookPath(file string, env []string) (string, error) {
	if strings.Contains(file, "/") {
		return file, nil
	}
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, d := range filepath.SplitList(path) {
		if d == "" || !filepath.IsAbs(d) {
			continue // never the working directory
		}
		p := filepath.Join(d, file)
		if info, err := os.Stat(p); err == nil && info.Mode().IsRegular() && info.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: %w", file, errNotInPath)
}

var errNotInPath = errors.New("executable file not found in PATH")
