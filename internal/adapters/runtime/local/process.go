package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"

	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// MarkerEnv is set in every gateway's environment to the agent's home, so that a later
// manager can recognize its gateways in /proc even when the engine renames its process.
const MarkerEnv = "AGENTPLANE_AGENT_HOME"

// adoptPoll is how often an adopted gateway (not our child: no wait status) is checked.
const adoptPoll = 250 * time.Millisecond

// process is one gateway process: our child, or adopted from a previous manager.
type process struct {
	pid     int
	start   uint64 // start time in clock ticks after boot (/proc/<pid>/stat field 22)
	adopted bool
	// restored: the gateway was restored from a checkpoint (checkpoint.go).
	restored bool
	started  time.Time
	// exited is closed once the process is gone; exitCode and exitDesc are set before.
	exited   chan struct{}
	exitCode int
	exitDesc string
	// healthySince is when the gateway first answered its health check (supervisor only).
	healthySince time.Time
	// authored is the digest of the engine config the gateway started on ("" not known; see
	// configChangedWhileStarting).
	authored string
	// oomKills is its agent's cgroup's OOM kill count when it started: more at its exit
	// means the kernel ended it for the memory limit.
	oomKills int64
	// net is what the manager serves for the gateway's network namespace (netns.go), closed
	// when the process exits (netMu guards it; netDone: the process has exited).
	netMu   sync.Mutex
	net     *gatewayNet
	netDone bool
}

// setNet gives p its network plumbing, closed at once if p has already exited.
func (p *process) setNet(g *gatewayNet) {
	p.netMu.Lock()
	defer p.netMu.Unlock()
	if p.netDone {
		g.close()
		return
	}
	p.net = g
}

// exit closes p's network plumbing and marks p exited (exitCode and exitDesc set before).
func (p *process) exit() {
	p.netMu.Lock()
	p.netDone = true
	if p.net != nil {
		p.net.close()
	}
	p.netMu.Unlock()
	close(p.exited)
}

// dropNet closes p's network plumbing while p runs on (a shutdown that keeps the gateways).
func (p *process) dropNet() {
	p.netMu.Lock()
	defer p.netMu.Unlock()
	if p.net != nil {
		p.net.close()
		p.net = nil
	}
}

// netNS is a copy of p's network namespace's fd for a command to join (nil: p has none), its
// caller's to close once the command ended: the number it is found at (/proc/<manager>/fd/N)
// cannot name another namespace meanwhile, whatever becomes of p.
func (p *process) netNS() *os.File {
	p.netMu.Lock()
	defer p.netMu.Unlock()
	if p.net == nil || p.netDone {
		return nil
	}
	return p.net.dup()
}

// netServed: p's network namespace is served (plumbNet), and p runs.
func (p *process) netServed() bool {
	p.netMu.Lock()
	defer p.netMu.Unlock()
	return p.net != nil && !p.netDone
}

func (p *process) hasExited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// launch describes a gateway start.
type launch struct {
	binary  string
	args    []string
	env     []string
	dir     string
	logPath string
	// sandboxed: binary is bwrap, whose sandbox (its PID namespace's init) is killed when
	// bwrap itself is gone, however it went.
	sandboxed bool
	// extra are further open files for the process (fd 3 on, after the sandbox's own when
	// sandboxed), closed here once it started.
	extra []*os.File
	// dieWithManager: the kernel kills the process when the manager dies (a compile-cache
	// warm-up; gateways outlive the manager). bwrap's own --die-with-parent is set too late
	// to catch a manager killed while bwrap starts; Go sets PR_SET_PDEATHSIG before exec and
	// kills the child itself if the parent is already gone.
	dieWithManager bool
	// merge: the process starts with its memory marked mergeable (Options.MemoryMerge).
	merge bool
}

// StartLineTime is the time format of the line a gateway's log gets before each start
// ("--- agentplane <time>: starting ..."): RFC 3339 in UTC, to the millisecond.
const StartLineTime = "2006-01-02T15:04:05.000Z07:00"

// startProcess starts a gateway in its own process group with stdout and stderr appended to
// the log file (a file, not a pipe: the gateway outlives the manager), stdin /dev/null.
func startProcess(l launch) (*process, error) {
	logf, err := os.OpenFile(l.logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "--- agentplane %s: starting %s %s\n", time.Now().UTC().Format(StartLineTime), l.binary, strings.Join(l.args, " "))
	cmd := &exec.Cmd{
		Path:        l.binary,
		Args:        append([]string{l.binary}, l.args...),
		Env:         l.env,
		Dir:         l.dir,
		Stdout:      logf,
		Stderr:      logf,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
		ExtraFiles:  l.extra,
	}
	if l.dieWithManager {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	if l.merge {
		if err := mergeable(cmd); err != nil {
			return nil, err
		}
	}
	if l.sandboxed {
		files, err := sandboxFiles()
		if err != nil {
			return nil, err
		}
		cmd.ExtraFiles = append(files, l.extra...)
	}
	defer closeFiles(cmd.ExtraFiles)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(logf, "--- agentplane: start failed: %v\n", err)
		return nil, err
	}
	p := &process{pid: cmd.Process.Pid, started: time.Now(), exited: make(chan struct{})}
	if info, err := readProcStat(p.pid); err == nil {
		p.start = info.start
	}
	go func() {
		var sbx procRef
		if l.sandboxed {
			sbx = waitSandboxInit(p.pid, 5*time.Second)
		}
		err := cmd.Wait()
		sbx.killAndWait()
		p.exitCode, p.exitDesc = describeExit(cmd.ProcessState, err)
		p.exit()
	}()
	return p, nil
}

// procRef is a process known by its pid and start time (not a later one that reused the pid).
type procRef struct {
	pid   int
	start uint64
}

// kill SIGKILLs the process if it still runs; for a sandbox's init, that ends its PID
// namespace and everything in it.
func (r procRef) kill() {
	if r.pid > 1 && procAlive(r.pid, r.start) {
		_ = syscall.Kill(r.pid, syscall.SIGKILL)
	}
}

// signalSandbox signals every process in the PID namespace whose init r is, but r itself.
func (r procRef) signalSandbox(sig syscall.Signal) {
	if r.pid <= 1 || !procAlive(r.pid, r.start) {
		return
	}
	ns, err := os.Readlink("/proc/" + strconv.Itoa(r.pid) + "/ns/pid")
	if err != nil {
		return
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == r.pid {
			continue
		}
		if l, err := os.Readlink("/proc/" + e.Name() + "/ns/pid"); err == nil && l == ns {
			_ = syscall.Kill(pid, sig)
		}
	}
}

// killAndWait kills the sandbox whose init r is and waits (up to 5 s) until its init is gone:
// the kernel has then ended every process in it, and the ports they held are free.
func (r procRef) killAndWait() {
	r.kill()
	for deadline := time.Now().Add(5 * time.Second); r.pid > 1 && procAlive(r.pid, r.start) && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
}

// sandboxInit is the child of pid that runs in another PID namespace: the init of the
// sandbox bwrap (pid) made. Zero when there is none.
func sandboxInit(pid int) procRef {
	p := strconv.Itoa(pid)
	ns, err := os.Readlink("/proc/" + p + "/ns/pid")
	if err != nil {
		return procRef{}
	}
	for _, c := range childPIDs(pid) {
		if cns, err := os.Readlink("/proc/" + strconv.Itoa(c) + "/ns/pid"); err == nil && cns != ns {
			if st, err := readProcStat(c); err == nil {
				return procRef{pid: c, start: st.start}
			}
		}
	}
	return procRef{}
}

// childPIDs are the children of process pid, of all its threads (read from /proc).
func childPIDs(pid int) []int {
	var out []int
	tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/children")
	for _, t := range tasks {
		b, _ := os.ReadFile(t)
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// waitSandboxInit waits until bwrap (pid) has made its sandbox, and returns its init.
func waitSandboxInit(pid int, within time.Duration) procRef {
	for deadline := time.Now().Add(within); time.Now().Before(deadline) && procAlive(pid, 0); time.Sleep(5 * time.Millisecond) {
		if r := sandboxInit(pid); r.pid != 0 {
			return r
		}
	}
	return procRef{}
}

// describeExit turns a wait status into an exit code (128+signal when killed) and words.
func describeExit(ps *os.ProcessState, err error) (int, string) {
	if ps == nil {
		return -1, fmt.Sprintf("unknown status (%v)", err)
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), fmt.Sprintf("signal %d (%s)", int(ws.Signal()), ws.Signal())
	}
	return ps.ExitCode(), fmt.Sprintf("exit code %d", ps.ExitCode())
}

// adoptProcess watches a gateway that is not the manager's child: one a previous manager
// started, or one restored from a checkpoint (restored: the host's init is its parent). With
// no wait status, its exit is noticed by polling /proc until the pid is gone, a zombie, or
// another process, and told by the last line of its log (initExit), when its sandbox's init
// wrote one there.
func adoptProcess(pid int, start uint64, log string, restored bool) *process {
	p := &process{pid: pid, start: start, adopted: true, restored: restored, started: time.Now(), exited: make(chan struct{})}
	sbx := sandboxInit(pid)
	go func() {
		t := time.NewTicker(adoptPoll)
		defer t.Stop()
		for range t.C {
			if !procAlive(pid, start) {
				sbx.killAndWait()
				var ok bool
				if p.exitCode, p.exitDesc, ok = initExit(log); !ok {
					p.exitCode, p.exitDesc = -1, "an unknown status (the gateway was adopted after a manager restart)"
					if restored {
						p.exitCode, p.exitDesc = -1, "an unknown status (the gateway was restored from a checkpoint)"
					}
				}
				p.exit()
				return
			}
		}
	}()
	return p
}

// stopProcess stops p's process group: SIGTERM, then SIGKILL after timeout (or at once when
// ctx ends), and SIGKILL again to whatever is left in the group once the leader is gone.
//
// A sandboxed gateway (p is its bwrap) gets SIGTERM on every process of its sandbox but the
// sandbox's init, as an unsandboxed one gets it on its whole process group; not on bwrap, which
// would leave at once and take the sandbox with it, with no time to shut down. SIGKILL goes to
// the sandbox's init, which ends everything in it.
func stopProcess(ctx context.Context, p *process, timeout time.Duration, log *logr.Logger) {
	term, kill := func() { signalGroup(p.pid, syscall.SIGTERM) }, func() { signalGroup(p.pid, syscall.SIGKILL) }
	if sbx := sandboxInit(p.pid); sbx.pid != 0 {
		term = func() { sbx.signalSandbox(syscall.SIGTERM) }
		kill = func() { sbx.kill(); signalGroup(p.pid, syscall.SIGKILL) }
	}
	term()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.exited:
	case <-t.C:
		if log != nil {
			log.Info("gateway did not stop in time, killing it", "pid", p.pid, "timeout", timeout)
		}
	case <-ctx.Done():
	}
	if p.hasExited() {
		killGroup(p.pid)
	} else {
		kill()
	}
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
		if log != nil {
			log.Info("gateway still not gone after SIGKILL", "pid", p.pid)
		}
	}
}

// signalGroup signals the process group led by pid, and pid itself should it have left it.
func signalGroup(pid int, sig syscall.Signal) {
	if pid <= 1 {
		return
	}
	_ = syscall.Kill(-pid, sig)
	_ = syscall.Kill(pid, sig)
}

// killGroup kills what is left in the process group led by pid once pid itself is gone (never
// pid alone: it may belong to another process by now).
func killGroup(pid int) {
	if pid > 1 {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}

// procStat is what the runtime reads from /proc/<pid>/stat.
type procStat struct {
	state byte
	ppid  int
	pgrp  int
	start uint64
	cpu   uint64 // user and system time of all its threads, in clock ticks (fields 14, 15)
}

func readProcStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	// The command name (field 2) is in parentheses and may hold spaces: split after it.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, errors.New("bad /proc stat")
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); field 22 (starttime) is f[19].
	if len(f) < 20 {
		return procStat{}, errors.New("short /proc stat")
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return procStat{}, err
	}
	ppid, _ := strconv.Atoi(f[1]) // field 4
	pgrp, _ := strconv.Atoi(f[2]) // field 5
	utime, _ := strconv.ParseUint(f[11], 10, 64)
	stime, _ := strconv.ParseUint(f[12], 10, 64)
	return procStat{state: f[0][0], ppid: ppid, pgrp: pgrp, start: start, cpu: utime + stime}, nil
}

// procAlive: pid runs (not a zombie) and, when start is known, is the process that started
// then (not a later one that reused the pid).
func procAlive(pid int, start uint64) bool {
	st, err := readProcStat(pid)
	if err != nil || st.state == 'Z' || st.state == 'X' {
		return false
	}
	return start == 0 || st.start == start
}

// adoptable returns the gateway recorded in st when it still runs and is ours: the same pid
// and start time, and a process of the engine (its executable under the engine dir, the
// engine binary on its command line, or our marker in its environment).
func (r *Runtime) adoptable(dir string, st state) *process {
	if st.PID <= 0 || st.StartTime == 0 || !procAlive(st.PID, st.StartTime) {
		return nil
	}
	proc := "/proc/" + strconv.Itoa(st.PID)
	home := homeOf(dir, st)
	ours := false
	if st.EngineDir != "" {
		engDir := st.EngineDir
		if real, err := filepath.EvalSymlinks(engDir); err == nil {
			engDir = real
		}
		if exe, err := os.Readlink(proc + "/exe"); err == nil && within(exe, engDir) {
			ours = true
		}
		if cmdline, err := os.ReadFile(proc + "/cmdline"); err == nil {
			bin := engineBinary(st.EngineDir)
			for _, arg := range strings.Split(string(cmdline), "\x00") {
				if arg == bin || (arg != "" && within(arg, engDir)) {
					ours = true
				}
			}
		}
	}
	if environ, err := os.ReadFile(proc + "/environ"); err == nil {
		for _, kv := range strings.Split(string(environ), "\x00") {
			if kv == MarkerEnv+"="+home {
				ours = true
			}
		}
	}
	if !ours {
		return nil
	}
	return adoptProcess(st.PID, st.StartTime, filepath.Join(dir, logFileName), false)
}

// adoptAll adopts the gateways a previous manager left running under StateDir. A recorded
// gateway that is gone (or is not ours any more) is forgotten; the next Ensure starts one. It
// returns the homes of warm pool members that agents claimed (they are the agents' now).
func (r *Runtime) adoptAll() map[string]bool {
	claimed := map[string]bool{}
	root := filepath.Join(r.opts.StateDir, "agents")
	namespaces, err := os.ReadDir(root)
	if err != nil {
		return claimed
	}
	for _, ns := range namespaces {
		names, err := os.ReadDir(filepath.Join(root, ns.Name()))
		if err != nil || !ns.IsDir() {
			continue
		}
		for _, n := range names {
			key := types.NamespacedName{Namespace: ns.Name(), Name: n.Name()}
			dir := r.AgentDir(key)
			st, err := readState(dir)
			if err != nil {
				r.opts.Log.Error(err, "cannot read agent state", "agent", key)
				continue
			}
			if st.Home != "" {
				claimed[homeOf(dir, st)] = true
			}
			if st.PID == 0 {
				continue
			}
			p := r.adoptable(dir, st)
			if p == nil {
				r.opts.Log.Info("the gateway of a previous manager is gone", "agent", key, "pid", st.PID)
				st.PID, st.StartTime = 0, 0
				if err := writeState(dir, st); err != nil {
					r.opts.Log.Error(err, "cannot write agent state", "agent", key)
				}
				continue
			}
			_, inner := st.inSandbox()
			if err := r.attach(p, st.Port, inner, homeOf(dir, st)); err != nil {
				r.opts.Log.Error(err, "cannot serve the adopted gateway's network: it is restarted once found unhealthy", "agent", key)
			}
			a := r.newAgent(key)
			a.setStateLocked(st)
			a.proc = p
			a.setPhase(runtime.PhaseStarting, "", "adopted a gateway that was already running")
			r.agents[key] = a
			r.ports[st.Port] = key
			go a.supervise()
			r.opts.Log.Info("adopted running gateway", "agent", key, "pid", st.PID, "port", st.Port)
		}
	}
	return claimed
}

// within reports whether path p is root or below it (both cleaned, no symlinks resolved).
func within(p, root string) bool {
	p, root = filepath.Clean(p), filepath.Clean(root)
	if p == root {
		return true
	}
	if root == "/" {
		return strings.HasPrefix(p, "/")
	}
	return strings.HasPrefix(p, root+string(filepath.Separator))
}
