package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// CRIUEnv names the CRIU binary the local runtime checkpoints suspended gateways with
// (Options.CRIU); `make criu` builds one into bin/criu (hack/build-criu.sh).
const CRIUEnv = "AGENTPLANE_CRIU"

// Files of a checkpoint, in <agent dir>/checkpoint (0700, the manager's: the images hold
// the gateway's memory, its tokens included).
const (
	checkpointDirName = "checkpoint"
	// sandboxRootName is the root dir a restored sandbox runs on (rootSkeleton), next to the
	// checkpoint: it stays while that sandbox runs (removing it would pull its root away).
	sandboxRootName = "sandbox-root"
)

// checkpointer checkpoints and restores sandboxed gateways with CRIU: a suspended agent's
// gateway gives its memory back and resumes with its process state. Only as root, with a
// CRIU that passes `criu check` on this kernel (Debian bookworm's 3.17 does not on 6.x: use
// hack/build-criu.sh) and with tini to be the sandbox's PID 1.
type checkpointer struct {
	criu, tini string
	// timeout bounds each CRIU run (criuTimeout when zero).
	timeout time.Duration
	// eager is why a waking gateway's memory is restored in full before it runs, not on
	// demand (checkpoint_lazy.go); "" when on demand.
	eager string
	// merge: restored gateways' memory is marked mergeable (Options.MemoryMerge): CRIU runs
	// marked, and the tree it restores is forked from it.
	merge bool
}

// criuTimeout bounds a CRIU run. A restore whose restored gateway dies while CRIU detaches it
// can leave CRIU waiting for its half-restored tree forever (seen with CRIU 4 on this kernel);
// the wake would wait with it.
const criuTimeout = 2 * time.Minute

// newCheckpointer returns a checkpointer for the CRIU at path, or nil and why there is none.
// path "" means $AGENTPLANE_CRIU, else a `criu` beside this program's executable (make run:
// bin/criu, which make sandbox-packages builds, beside bin/agentplane); "off" means none.
func newCheckpointer(ctx context.Context, path string, timeout time.Duration) (*checkpointer, string) {
	if path == "" {
		path = os.Getenv(CRIUEnv)
	}
	if path == "" {
		if exe, err := os.Executable(); err == nil {
			if p := filepath.Join(filepath.Dir(exe), "criu"); fileExists(p) {
				path = p
			}
		}
	}
	switch path {
	case "":
		return nil, "no CRIU beside the agentplane binary nor in " + CRIUEnv + " (make sandbox-packages builds bin/criu)"
	case "off":
		return nil, CRIUEnv + "=off"
	}
	if os.Geteuid() != 0 {
		return nil, "CRIU needs root"
	}
	tini, err := exec.LookPath("tini")
	if err != nil || !within(tini, "/usr") {
		return nil, "tini is not installed under /usr (apt-get install tini)"
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, path, "check").CombinedOutput(); err != nil {
		return nil, fmt.Sprintf("%s check: %v: %s", path, err, lastLines(out, 3))
	}
	closeOnExecInherited()
	return &checkpointer{criu: path, tini: tini, timeout: timeout}, ""
}

// closeOnExecInherited marks the files this process inherited without close-on-exec (fds
// above 2 that whoever started the manager left open) close-on-exec: Go's os/exec passes
// them on to every child, and CRIU cannot checkpoint a sandbox holding a file of this host
// that the sandbox does not show.
func closeOnExecInherited() {
	entries, _ := os.ReadDir("/proc/self/fd")
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
}

// LazyRestore reports whether a waking gateway's memory is restored on demand
// (checkpoint_lazy.go) and, when it is not, why.
func (r *Runtime) LazyRestore() (bool, string) {
	if r.ckpt == nil {
		return false, "no checkpoints: " + r.noCheckpoint
	}
	return r.ckpt.eager == "", r.ckpt.eager
}

// Checkpoints reports whether suspended gateways are checkpointed and, when not, why.
func (r *Runtime) Checkpoints() (bool, string) { return r.ckpt != nil, r.noCheckpoint }

// criuOpts are the options dump and restore share. Established TCP connections are closed, not
// kept: after a sleep their peers have long given up on them, and the gateway reconnects (the
// channels' long polls) as after any network error. The sandbox's bind mounts of this host's
// dirs are external mounts, found again at the same paths on restore. Cgroups are not CRIU's:
// its default walks the whole subtree of each of the gateway's cgroups at the dump (on cgroup
// v1 the host's root in every hierarchy the runtime does not limit, a kubelet's pods among
// them) and makes all it saw again at the restore, which fails when one goes meanwhile. A
// restore runs CRIU in the agent's cgroups instead (cgroupWrap), and the restored tree stays in
// them.
var criuOpts = []string{"--tcp-close", "--file-locks", "--ext-mount-map", "auto", "--enable-external-masters", "--enable-external-sharing",
	"--manage-cgroups=ignore"}

// How a restored gateway's status says its memory was restored.
const (
	restoredOnDemand = "its memory on demand"
	// restoredEagerly: in full, because this runtime restores no memory on demand.
	restoredEagerly = "its memory in full"
	// restoredInFull: in full, because its restore on demand failed (then why).
	restoredInFull = restoredEagerly + ": it could not be restored on demand"
)

const (
	// criuExitingZombie is CRIU's error for a process it caught exiting.
	criuExitingZombie = "Zombies with threads are not supported"
	// dumpTries is how many times a dump refused for criuExitingZombie is tried.
	dumpTries = 4
)

// dump checkpoints the sandbox whose PID 1 is init into dir and ends it. args are the bwrap
// arguments it was started with: the root skeleton restore needs is made from them in root.
// clock is the clocks its restore gives (checkpoint_clock.go). extra are further CRIU options
// (a template's named mounts).
func (c *checkpointer) dump(ctx context.Context, init int, dir, root string, args []string, clock clockMode, extra ...string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := rootSkeleton(args, root); err != nil {
		return fmt.Errorf("sandbox root: %w", err)
	}
	// A connection not accepted yet when the dump runs (a health probe, a client) is dropped
	// like one that arrives during the sleep: its client retries. Without --skip-in-flight
	// it fails the dump, and the gateway is stopped with its memory lost. The network is not
	// locked: CRIU's lock (iptables rules in the sandbox's namespace for the dump, removed
	// after the restore, which reads the method from the images) holds packets back while it
	// saves and restores connections' state, which --tcp-close never saves. It ran two
	// iptables-restore at each end, and in a namespace the runtime made for the restore
	// (checkpoint_netns.go) the removal failed.
	dumpArgs := append(append([]string{"dump", "-t", strconv.Itoa(init), "-D", dir, "--skip-in-flight", "--network-lock", "skip"},
		criuOpts...), extra...)
	// The sandbox's network namespace is the runtime's to make again (checkpoint_netns.go).
	netns, err := externalNetNSArgs(init)
	if err != nil {
		return err
	}
	dumpArgs = append(dumpArgs, netns...)
	offsets, err := readClockOffsets(init)
	if err != nil {
		return err
	}
	// A process of the sandbox caught exiting (a zombie whose threads are still going) makes
	// CRIU refuse the dump and leave the tree running; a moment later it is reaped, so such a
	// dump is tried again, a few times.
	for try := 1; ; try++ {
		err := c.run(ctx, dir, "dump.log", dumpArgs...)
		if err == nil {
			break
		}
		if try == dumpTries || !strings.Contains(err.Error(), criuExitingZombie) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(try) * 200 * time.Millisecond):
		}
	}
	if err := keepClock(dir, clock, offsets); err != nil {
		return fmt.Errorf("the checkpoint's clocks: %w", err)
	}
	if netns != nil {
		return markNetNSExternal(dir)
	}
	return nil
}

// restore restores the checkpoint in dir into the cgroups whose cgroup.procs files are procs
// (none: CRIU's own, this program's) and returns the restored sandbox's PID 1 (in this host's
// PID namespace).
func (c *checkpointer) restore(ctx context.Context, dir, root string, procs []string) (int, error) {
	return c.restoreFrom(ctx, dir, root, dir, procs)
}

// restoreFrom is restore with CRIU's log and pid file in work, not in the images' dir
// images: one image restored many times (a template's) is only read. With procs (cgroupWrap)
// CRIU runs in those cgroups and leaves the restored tree in them (a copy of a template goes
// to its agent's cgroups, not to the template's). extra are further CRIU options (where a
// copy's named mounts come from).
func (c *checkpointer) restoreFrom(ctx context.Context, images, root, work string, procs []string, extra ...string) (int, error) {
	pidFile := filepath.Join(work, "restore.pid")
	if err := os.Remove(pidFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, err
	}
	if err := clockForRestore(images); err != nil {
		return 0, fmt.Errorf("the checkpoint's clocks: %w", err)
	}
	args := append(append([]string{"restore", "-D", images, "-W", work, "-d", "--pidfile", pidFile, "--root", root}, criuOpts...), extra...)
	netns, nsArgs, err := restoreNetNS(images)
	if err != nil {
		return 0, err
	}
	var files []*os.File
	if netns != nil {
		defer netns.Close() // the restored tree holds the namespace
		files, args = []*os.File{netns}, append(args, nsArgs...)
	}
	if err := c.runIn(ctx, procs, files, work, "restore.log", args...); err != nil {
		return 0, err
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// run runs CRIU with its log in dir/log; an error carries the log's error lines.
func (c *checkpointer) run(ctx context.Context, dir, log string, args ...string) error {
	return c.runIn(ctx, nil, nil, dir, log, args...)
}

// runIn is run with CRIU in the cgroups whose cgroup.procs files are procs (none: its own),
// given files as its fds 3 and on.
func (c *checkpointer) runIn(ctx context.Context, procs []string, files []*os.File, dir, log string, args ...string) error {
	args = append(args, "-o", log)
	timeout := c.runTimeout()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	bin, argv := c.criu, args
	if procs != nil {
		bin, argv = cgroupWrap(procs, bin, argv)
	}
	cmd := exec.CommandContext(ctx, bin, argv...)
	cmd.ExtraFiles = files
	if c.merge && args[0] == "restore" {
		if err := mergeable(cmd); err != nil {
			return err
		}
	}
	// Cut off, CRIU's children (a half-restored tree) go with it, and an output pipe one of
	// them holds does not keep the wait.
	var cut atomic.Bool
	cmd.Cancel = func() error {
		cut.Store(true)
		killChildren(cmd.Process.Pid)
		return cmd.Process.Kill()
	}
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	switch {
	case err == nil && !cut.Load():
		return nil
	case err == nil:
		// Its children killed, it may end well before its own kill lands (make test's
		// hanging CRIU did, a shell's wait): a run cut off failed all the same.
		err = errors.New("it ended as it was cut off")
	}
	switch cause := context.Cause(ctx); {
	case cause == nil:
	case errors.Is(cause, context.DeadlineExceeded):
		err = fmt.Errorf("%w (cut off after %s)", err, timeout)
	default:
		err = fmt.Errorf("%w (cut off: %w)", err, cause)
	}
	errs := logErrorLines(filepath.Join(dir, log), 3)
	return fmt.Errorf("criu %s: %v: %s%s", args[0], err, strings.Join(errs, "; "), lastLines(out, 2))
}

// runTimeout bounds one CRIU run.
func (c *checkpointer) runTimeout() time.Duration {
	if c.timeout == 0 {
		return criuTimeout
	}
	return c.timeout
}

// killChildren SIGKILLs the children of process pid (read from /proc).
func killChildren(pid int) {
	for _, c := range childPIDs(pid) {
		_ = syscall.Kill(c, syscall.SIGKILL)
	}
}

// lastLines is the last n lines of out, trimmed.
func lastLines(out []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " / ")
}

// rootSkeleton makes (or completes: a restored sandbox runs on it) in root what bwrap made in the sandbox's root (a tmpfs CRIU does not
// dump: the root of a mount namespace is given to `criu restore --root`): the dirs and files
// its mounts are mounted on, the dirs it was asked for and its symlinks, from the bwrap
// arguments args. What is inside one of the sandbox's mounts is that mount's (CRIU restores a
// tmpfs's files, a bind mount shows its source).
func rootSkeleton(args []string, root string) error {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	s := &skeleton{root: root}
	perms := fs.FileMode(0o755)
	for i := 0; i < len(args) && args[i] != "--"; i++ {
		opt := args[i]
		n, err := bwrapArity(opt)
		if err != nil {
			return err
		}
		if i+n >= len(args) {
			return fmt.Errorf("bwrap option %s lacks its arguments", opt)
		}
		v := args[i+1 : i+1+n]
		i += n
		switch opt {
		case "--perms":
			if perms, err = parsePerms(v[0]); err != nil {
				return err
			}
			continue
		case "--size": // the next --tmpfs's size: its mount's, which CRIU restores
			continue
		}
		if err := s.apply(opt, v, perms); err != nil {
			return err
		}
		perms = 0o755
	}
	return nil
}

// bwrapArity is how many arguments the bwrap option opt takes; an option the checkpoint
// does not know is an error.
func bwrapArity(opt string) (int, error) {
	switch opt {
	case "--bind", "--ro-bind", "--dev-bind", "--bind-try", "--ro-bind-try", "--symlink", "--setenv":
		return 2, nil
	case "--perms", "--size", "--proc", "--dev", "--tmpfs", "--mqueue", "--dir",
		"--chdir", "--hostname", "--seccomp", "--cap-add", "--cap-drop", "--uid", "--gid", "--unsetenv":
		return 1, nil
	}
	if !strings.HasPrefix(opt, "--unshare-") && !slices.Contains([]string{"--as-pid-1", "--new-session", "--die-with-parent", "--disable-userns", "--clearenv"}, opt) {
		return 0, fmt.Errorf("bwrap option %s is not known to the checkpoint", opt)
	}
	return 0, nil
}

// parsePerms is bwrap's --perms (octal; 01000 is the sticky bit).
func parsePerms(v string) (fs.FileMode, error) {
	m, err := strconv.ParseUint(v, 8, 32)
	if err != nil {
		return 0, err
	}
	perms := fs.FileMode(m & 0o777)
	if m&0o1000 != 0 {
		perms |= fs.ModeSticky
	}
	return perms, nil
}

// skeleton is a sandbox's root being made: its dir and the mounts made in it so far.
type skeleton struct {
	root   string
	mounts []string
}

// apply makes what the bwrap option opt with its arguments v makes in the root (a --dir
// with perms); options that make nothing there are left alone.
func (s *skeleton) apply(opt string, v []string, perms fs.FileMode) error {
	switch opt {
	case "--bind", "--ro-bind", "--dev-bind", "--bind-try", "--ro-bind-try":
		return s.mountpoint(v[0], v[1])
	case "--proc", "--dev", "--tmpfs", "--mqueue":
		err := s.mkdir(v[0], 0o755)
		s.mounts = append(s.mounts, v[0])
		return err
	case "--dir":
		return s.mkdir(v[0], perms)
	case "--symlink":
		if s.inMount(v[1]) {
			return nil
		}
		if err := os.Symlink(v[0], filepath.Join(s.root, v[1])); !errors.Is(err, fs.ErrExist) {
			return err
		}
		return nil // made by an earlier checkpoint: the root is reused
	}
	return nil
}

// inMount says whether p is inside one of the mounts (not the mount itself).
func (s *skeleton) inMount(p string) bool {
	for _, m := range s.mounts {
		if p != m && within(p, m) {
			return true
		}
	}
	return false
}

// mkdir makes the dir p with mode, unless it is inside a mount.
func (s *skeleton) mkdir(p string, mode fs.FileMode) error {
	if s.inMount(p) {
		return nil
	}
	if err := os.MkdirAll(filepath.Join(s.root, p), 0o755); err != nil {
		return err
	}
	return os.Chmod(filepath.Join(s.root, p), mode)
}

// mountpoint makes what src is mounted on at dst (a file for a file, else a dir), unless it
// is inside a mount; dst is a mount from then on.
func (s *skeleton) mountpoint(src, dst string) error {
	if s.inMount(dst) {
		return nil
	}
	defer func() { s.mounts = append(s.mounts, dst) }()
	if info, err := os.Stat(src); err == nil && !info.IsDir() {
		if err := os.MkdirAll(filepath.Join(s.root, filepath.Dir(dst)), 0o755); err != nil {
			return err
		}
		f, err := os.OpenFile(filepath.Join(s.root, dst), os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		return f.Close()
	}
	return s.mkdir(dst, 0o755)
}

// checkpointLocked checkpoints the running gateway of a suspending agent into its checkpoint
// dir, which ends it. When that cannot be done the gateway is left running (stopLocked then
// stops it as without checkpoints) and the reason is logged.
func (a *agent) checkpointLocked(ctx context.Context) {
	c, p := a.rt.ckpt, a.proc
	if c == nil || p == nil || p.hasExited() || a.phase != runtime.PhaseRunning {
		return
	}
	if !a.lazyDoneLocked(ctx) {
		a.log.Info("cannot checkpoint the gateway: its memory is still being restored, so it is stopped instead", "waited", lazyWait)
		return
	}
	if p.hasExited() {
		return
	}
	init := sandboxInit(p.pid)
	if init.pid == 0 {
		init = procRef{pid: p.pid, start: p.start} // a restored gateway: p is the sandbox's PID 1
	}
	bin, args, err := a.gatewaySandboxLocked(false)
	_, args = cgroupUnwrap(bin, args) // bwrap's own arguments
	dir := filepath.Join(a.dir, checkpointDirName)
	start := time.Now()
	if err == nil {
		if q := a.rt.opts.Quiesce; q != nil {
			defer q(a.key)() // before settle, which then waits for the gateway to take it in
		}
		if !settle(ctx, init.pid, settleQuiet, settleBound, settleCPU, a.busy) {
			a.log.Info("the gateway stayed busy: checkpointing it all the same", "waited", settleBound)
		}
		err = c.dump(ctx, init.pid, dir, filepath.Join(a.dir, sandboxRootName), args, clockRuns)
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		a.log.Info("cannot checkpoint the gateway: stopping it instead", "error", err.Error())
		return
	}
	init.killAndWait() // CRIU ended it; its PID namespace is gone once its init is
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
	}
	a.proc = nil
	a.st.PID, a.st.StartTime, a.st.Checkpoint = 0, 0, true
	a.st.CheckpointAt, a.st.CheckpointPacked = time.Now(), false
	a.unhealthy = 0
	a.saveLocked()
	took := time.Since(start).Round(time.Millisecond)
	a.thinCheckpointLocked(dir)
	size, _ := checkpointBytes(dir)
	a.log.Info("gateway checkpointed", "took", took, "dir", dir, "diskMiB", size>>20)
	a.poke() // the supervisor schedules the checkpoint's packing (packDueLocked)
}

// restoreLocked restores the checkpointed gateway of a waking agent, else (the restore
// failed) starts it anew, which the phase's reason says. The checkpoint is used once.
func (a *agent) restoreLocked(ctx context.Context) {
	dir := filepath.Join(a.dir, checkpointDirName)
	defer a.discardCheckpointLocked()
	start := time.Now()
	err := a.restoreProcessLocked(ctx, dir)
	if err == nil {
		a.log.Info("gateway restored from its checkpoint", "pid", a.proc.pid, "took", time.Since(start).Round(time.Millisecond),
			"memoryOnDemand", a.lazy != nil)
		return
	}
	a.restoreFailedLocked(ctx, err)
}

// restoredGrace: a restored gateway that exits within this time of its restore counts as a
// failed restore, not as a crash (a process restored into a state it cannot go on from,
// say a Node assertion on a restored IPC pipe, ends at once).
const restoredGrace = time.Minute

// restoreFailedLocked starts the gateway anew after a failed restore, and says so.
func (a *agent) restoreFailedLocked(ctx context.Context, err error) {
	a.log.Info("cannot restore the gateway's checkpoint: starting it anew", "error", err.Error())
	a.startLocked(ctx)
	if a.phase == runtime.PhaseStarting {
		a.setPhase(runtime.PhaseStarting, agentsv1.ReasonCheckpointRestoreFailed,
			"the gateway's checkpoint could not be restored, so it starts anew (its home is kept): "+err.Error())
	}
}

func (a *agent) restoreProcessLocked(ctx context.Context, dir string) error {
	c := a.rt.ckpt
	if c == nil {
		return errors.New("this runtime does not restore checkpoints (" + a.rt.noCheckpoint + ")")
	}
	port, err := a.rt.allocatePort(a.key, a.st.Port)
	if err != nil {
		return err
	}
	if port != a.st.Port {
		return fmt.Errorf("port %d, which the checkpointed gateway listens on, is taken", a.st.Port)
	}
	var procs []string
	if cg := a.rt.cg; cg != nil {
		// The restored tree goes into the agent's cgroup, which the sweep may have removed
		// meanwhile (it is made anew, with its limits).
		uid, err := a.rt.sbx.uids.of(a.home)
		if err != nil {
			return err
		}
		if procs, err = cg.join(uid); err != nil {
			return fmt.Errorf("the agent's cgroup: %w", err)
		}
	}
	// Whatever the state says: a manager that ended while it packed left some files packed.
	start := time.Now()
	if n, err := unpackCheckpoint(dir); err != nil {
		return err
	} else if n > 0 {
		a.log.Info("checkpoint decompressed", "files", n, "took", time.Since(start).Round(time.Millisecond))
	}
	pid, how, err := a.restoreMemoryLocked(ctx, dir, procs)
	if err != nil {
		return err
	}
	st, err := readProcStat(pid)
	if err != nil {
		return fmt.Errorf("restored gateway (pid %d) is gone: %w", pid, err)
	}
	p := adoptProcess(pid, st.start, filepath.Join(a.dir, logFileName), true)
	_, inner := a.st.inSandbox()
	if err := a.rt.attach(p, a.st.Port, inner, a.home); err != nil {
		procRef{pid: pid, start: st.start}.killAndWait()
		return err
	}
	a.proc, a.unhealthy = p, 0
	a.st.PID, a.st.StartTime = pid, st.start
	a.saveLocked()
	a.setPhase(runtime.PhaseStarting, agentsv1.ReasonRestoredFromCheckpoint, "the gateway was restored from its checkpoint, "+how)
	a.since = time.Now()
	a.poke()
	return nil
}

// restoreMemoryLocked restores the checkpoint in dir into the cgroups procs and returns the
// restored sandbox's PID 1 and how its memory was restored, for the status: on demand where
// this host allows (a.lazy is then its page server), else in full.
func (a *agent) restoreMemoryLocked(ctx context.Context, dir string, procs []string) (pid int, how string, err error) {
	c, root := a.rt.ckpt, filepath.Join(a.dir, sandboxRootName)
	how = restoredEagerly
	if c.eager == "" {
		pid, lp, err := c.restoreLazily(ctx, a.rt, dir, root, procs)
		if err == nil {
			a.lazy = lp
			return pid, restoredOnDemand, nil
		}
		a.log.Info("cannot restore the gateway's memory on demand: restoring it in full", "error", err.Error())
		how = restoredInFull + ": " + err.Error()
	}
	pid, err = c.restore(ctx, dir, root, procs)
	return pid, how, err
}

// discardCheckpointLocked removes the agent's checkpoint, if any. The checkpoint a page
// server still copies from is that server's to remove (checkpoint_lazy.go).
func (a *agent) discardCheckpointLocked() {
	if !a.st.Checkpoint {
		return
	}
	if a.lazy != nil {
		a.st.Checkpoint, a.st.CheckpointAt, a.st.CheckpointPacked = false, time.Time{}, false
		a.saveLocked()
		return
	}
	if err := os.RemoveAll(filepath.Join(a.dir, checkpointDirName)); err != nil {
		a.log.Error(err, "cannot remove the gateway's checkpoint")
	}
	a.st.Checkpoint, a.st.CheckpointAt, a.st.CheckpointPacked = false, time.Time{}, false
	a.saveLocked()
}

// fileExists tells whether path names a regular file.
func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}
