package local_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
	"k8s.io/apimachinery/pkg/types"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/adapters/runtime/local"
	"github.com/agentplane/agentplane/internal/devtools/testenv"
)

// criuPath is the CRIU the checkpoint tests use: $AGENTPLANE_CRIU, else the checkout's
// bin/criu (make criu, make sandbox-packages). Without one, or not as root, they skip, and
// fail under CI=true: CI must run them.
func criuPath(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Skip(t, "checkpoints need root")
	}
	if p := os.Getenv(local.CRIUEnv); p != "" {
		return p
	}
	p, _ := filepath.Abs("../../../../bin/criu")
	if _, err := os.Stat(p); err != nil {
		testenv.Skip(t, "no CRIU: set %s or run make criu", local.CRIUEnv)
	}
	return p
}

// checkpointing builds a sandboxed fixture whose runtime checkpoints suspended gateways.
func checkpointing(t *testing.T, mutate ...func(*local.Options)) *fixture {
	t.Helper()
	criu := criuPath(t)
	f := newFixture(t, append([]func(*local.Options){func(o *local.Options) {
		o.Sandbox, o.CRIU = local.SandboxRequired, criu
	}}, mutate...)...)
	if ok, why := f.rt.Checkpoints(); !ok {
		testenv.Skip(t, "this host cannot checkpoint gateways: %s", why)
	}
	return f
}

// gatewayStarts counts the gateway's starts in its log (each start logs one line with
// marker; a restored gateway does not start again).
func gatewayStarts(t *testing.T, f *fixture, a *agentsv1.Agent, marker string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.rt.AgentDir(keyOf(a)), "gateway.log"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), marker)
}

// ckptDesired is desired(token) for the fake engine, a Go program: Go listens with MPTCP
// where the kernel has it, which CRIU 4.1 cannot checkpoint (the real engine, Node, does not).
func ckptDesired(token string) runtime.Desired {
	d := desired(token)
	d.Env = map[string]string{"GODEBUG": "multipathtcp=0"}
	return d
}

func suspended(d runtime.Desired) runtime.Desired {
	d.Stopped, d.Suspended = true, true
	return d
}

// suspendAndResume suspends a running agent (checkpointing its gateway), checks that no
// process of it is left and its checkpoint is kept, then resumes it and returns what the
// first Ensure of the resume reported.
func suspendAndResume(t *testing.T, f *fixture, a *agentsv1.Agent, d runtime.Desired, breakIt func(dir string)) runtime.Observed {
	t.Helper()
	pid := gatewayPID(t, f, a)
	if o := ensure(t, f, a, suspended(d)); o.Phase != runtime.PhaseStopped {
		t.Fatalf("suspend: %+v", o)
	}
	waitGone(t, pid)
	dir := filepath.Join(f.rt.AgentDir(keyOf(a)), "checkpoint")
	if _, err := os.Stat(filepath.Join(dir, "inventory.img")); err != nil {
		t.Fatalf("no checkpoint after suspend: %v", err)
	}
	if breakIt != nil {
		breakIt(dir)
	}
	o := ensure(t, f, a, d)
	waitCheckpointGone(t, dir)
	return o
}

// waitCheckpointGone waits until the checkpoint dir is removed: it is used once, and removed
// once restored (or, restored on demand, once its page server copied every page). It looks
// again at each change of the agent dir's entries.
func waitCheckpointGone(t *testing.T, dir string) {
	t.Helper()
	w, err := fsnotify.NewWatcher()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Add(filepath.Dir(dir)); err != nil {
		t.Fatal(err)
	}
	bound := time.After(eventBound)
	for {
		_, err := os.Stat(dir)
		if os.IsNotExist(err) {
			return
		}
		select {
		case <-w.Events:
		case err := <-w.Errors:
			t.Fatalf("watch %s: %v", filepath.Dir(dir), err)
		case <-bound:
			t.Fatalf("checkpoint left after resume: %v", err)
		}
	}
}

// TestSuspendCheckpointsAndResumeRestores: a suspended agent's gateway is checkpointed (its
// processes end) and restored on resume, the same process (it logs no second start), serving
// its token; a second suspend and resume of the restored gateway works the same. The
// checkpoint leaves the sandbox's network namespace out (CRIU would make it again with six
// programs on each restore): the restored gateway is in a namespace of its own that the
// runtime made, not the host's.
func TestSuspendCheckpointsAndResumeRestores(t *testing.T) {
	var mu sync.Mutex
	var quiesces []string // what Options.Quiesce saw: when it was called and released
	var f *fixture
	a := newAgent("ckpt")
	f = checkpointing(t, func(o *local.Options) {
		o.Quiesce = func(agent types.NamespacedName) func() {
			saw := func(what string) {
				_, err := os.Stat(filepath.Join(f.rt.AgentDir(keyOf(a)), "checkpoint", "inventory.img"))
				mu.Lock()
				defer mu.Unlock()
				quiesces = append(quiesces, fmt.Sprintf("%s dumped=%v", what, err == nil))
			}
			saw("quiesce " + agent.String())
			return func() { saw("release") }
		}
	})
	d := ckptDesired("tok-1")
	o := waitPhase(t, f, a, d, runtime.PhaseRunning)
	host := netNSOf(t, os.Getpid())
	for round := 1; round <= 2; round++ {
		mu.Lock()
		quiesces = nil
		mu.Unlock()
		r := suspendAndResume(t, f, a, d, func(dir string) {
			// The agent's connections to the platform were ended before the dump, and held
			// off until it had ended (Options.Quiesce).
			mu.Lock()
			got := strings.Join(quiesces, ", ")
			mu.Unlock()
			if want := "quiesce " + keyOf(a).String() + " dumped=false, release dumped=true"; got != want {
				t.Fatalf("round %d: Quiesce saw %q, want %q", round, got, want)
			}
			// CRIU's dump of a namespace it makes again: its addresses and its iptables.
			for _, img := range []string{"ifaddr-*.img", "iptables-*.img"} {
				if m, _ := filepath.Glob(filepath.Join(dir, img)); len(m) > 0 {
					t.Fatalf("round %d: the checkpoint holds the sandbox's network namespace: %v", round, m)
				}
			}
		})
		if r.Reason != agentsv1.ReasonRestoredFromCheckpoint {
			t.Fatalf("round %d: resume = %+v, want reason %s", round, r, agentsv1.ReasonRestoredFromCheckpoint)
		}
		waitPhase(t, f, a, d, runtime.PhaseRunning)
		if ns := netNSOf(t, gatewayPID(t, f, a)); ns == host {
			t.Fatalf("round %d: the restored gateway runs in the host's network namespace (%d): want one of its own", round, ns)
		}
		if n := gatewayStarts(t, f, a, "[gateway] listening on"); n != 1 {
			t.Fatalf("round %d: the gateway started %d times, want once (restored, not restarted)", round, n)
		}
		// The restored sandbox keeps its bounds: its /tmp is the tmpfs of runtime.TmpSize.
		if got, want := tmpMountSize(t, gatewayPID(t, f, a)), fmt.Sprintf("size=%dk", runtime.TmpSize>>10); got != want {
			t.Fatalf("round %d: the restored gateway's /tmp has %q, want %q", round, got, want)
		}
		waitStatus(t, o.Endpoint, "tok-1", http.StatusNotFound)
	}
}

// netNSOf is the inode of process pid's network namespace.
func netNSOf(t *testing.T, pid int) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(fmt.Sprintf("/proc/%d/ns/net", pid), &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// tmpMountSize is the size option of the tmpfs on /tmp in process pid's mount namespace ("" when
// there is none, or it has no size).
func tmpMountSize(t *testing.T, pid int) string {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		fields, super := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || fields[4] != "/tmp" || len(super) < 3 || super[0] != "tmpfs" {
			continue
		}
		for _, o := range strings.Split(super[2], ",") {
			if strings.HasPrefix(o, "size=") {
				return o
			}
		}
	}
	return ""
}

// TestRestoreFailureFallsBackToColdResume: a checkpoint that cannot be restored is dropped,
// the gateway starts anew from the kept home, and the phase's reason says so.
func TestRestoreFailureFallsBackToColdResume(t *testing.T) {
	f := checkpointing(t)
	a := newAgent("ckpt-broken")
	d := ckptDesired("tok-1")
	o := waitPhase(t, f, a, d, runtime.PhaseRunning)
	marker := filepath.Join(f.rt.AgentDir(keyOf(a)), "home", ".openclaw", "workspace", "kept.txt")
	if err := os.WriteFile(marker, []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := suspendAndResume(t, f, a, d, func(dir string) {
		if err := os.Remove(filepath.Join(dir, "inventory.img")); err != nil {
			t.Fatal(err)
		}
	})
	if r.Reason != agentsv1.ReasonCheckpointRestoreFailed || !strings.Contains(r.Message, "starts anew") {
		t.Fatalf("resume = %+v, want reason %s", r, agentsv1.ReasonCheckpointRestoreFailed)
	}
	waitPhase(t, f, a, d, runtime.PhaseRunning)
	if n := gatewayStarts(t, f, a, "[gateway] listening on"); n != 2 {
		t.Fatalf("the gateway started %d times, want twice (a cold resume)", n)
	}
	if b, err := os.ReadFile(marker); err != nil || string(b) != "kept" {
		t.Fatalf("home not kept: %q, %v", b, err)
	}
	waitStatus(t, o.Endpoint, "tok-1", http.StatusNotFound)
}

// TestRestoredGatewayThatDiesIsAFailedRestore: a restored gateway that ends right after its
// restore (as one whose timers ran out while it was checkpointed does: the restored process's
// monotonic clock counts the sleep, so its timers due meanwhile fire at once) is not left to
// the crash backoff: it starts anew at once, and the reason says the restore failed.
func TestRestoredGatewayThatDiesIsAFailedRestore(t *testing.T) {
	f := checkpointing(t)
	a := newAgent("ckpt-dies")
	d := ckptDesired("tok-1")
	// The gateway crashes when this file appears (FAKECLAW_CRASH_ON): after CRIU has restored
	// it. (A timer due during the suspend fires while CRIU still detaches the restored tree,
	// which CRIU does not always survive.)
	trigger := filepath.Join(f.rt.AgentDir(keyOf(a)), "home", "crash-now")
	d.Env["FAKECLAW_CRASH_ON"] = trigger
	waitPhase(t, f, a, d, runtime.PhaseRunning)
	pid := gatewayPID(t, f, a)
	ensure(t, f, a, suspended(d))
	waitGone(t, pid)
	if _, err := os.Stat(filepath.Join(f.rt.AgentDir(keyOf(a)), "checkpoint", "inventory.img")); err != nil {
		t.Fatalf("no checkpoint (the gateway crashed before the suspend?): %v", err)
	}
	if o := ensure(t, f, a, d); o.Reason != agentsv1.ReasonRestoredFromCheckpoint {
		t.Fatalf("resume = %+v", o)
	}
	if err := os.WriteFile(trigger, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(eventBound)
	for {
		o := ensure(t, f, a, d)
		if o.Reason == agentsv1.ReasonCheckpointRestoreFailed {
			// The restored gateway is not the manager's child: its sandbox's init tells
			// how it ended (fakeclaw's crash is exit code 1).
			if !strings.Contains(o.Message, "restored gateway exited with exit code 1 after") || o.Restarts != 0 {
				t.Fatalf("after the restored gateway died: %+v", o)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s after the restored gateway died: %+v", agentsv1.ReasonCheckpointRestoreFailed, o)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for deadline := time.Now().Add(eventBound); gatewayStarts(t, f, a, "[gateway] listening on") != 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the gateway started %d times, want twice (restored, then anew)", gatewayStarts(t, f, a, "[gateway] listening on"))
		}
	}
}

// TestStopDropsTheCheckpoint: an explicit stop of a suspended agent drops its checkpoint,
// and the next start is cold.
func TestStopDropsTheCheckpoint(t *testing.T) {
	f := checkpointing(t)
	a := newAgent("ckpt-stop")
	d := ckptDesired("tok-1")
	waitPhase(t, f, a, d, runtime.PhaseRunning)
	ensure(t, f, a, suspended(d))
	dir := filepath.Join(f.rt.AgentDir(keyOf(a)), "checkpoint")
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("no checkpoint after suspend: %v", err)
	}
	stopped := d
	stopped.Stopped = true
	ensure(t, f, a, stopped)
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("checkpoint kept after an explicit stop: %v", err)
	}
	if o := ensure(t, f, a, d); o.Reason == agentsv1.ReasonRestoredFromCheckpoint {
		t.Fatalf("restored after an explicit stop: %+v", o)
	}
	waitPhase(t, f, a, d, runtime.PhaseRunning)
}

// TestRealEngineCheckpoint: the real OpenClaw gateway (AGENTPLANE_ENGINE_DIR) is
// checkpointed on suspend and restored on resume without a second boot; the restored gateway
// serves its token and its scheduler: a cron job added before the suspend is listed through
// the gateway after the resume (the CLI talks to the running gateway). The restored gateway
// holds every file lock it held: the engine's SQLite keeps a read lock on its WAL index
// (openclaw.sqlite-shm), which it maps, and a restore that lost it (CRIU 4.1.1 closes the
// files it maps through after taking the locks: hack/criu/patches/0004) let the next process
// to open the database truncate the index under the gateway, which died of SIGBUS during a
// plugin's install.
func TestRealEngineCheckpoint(t *testing.T) {
	dir := os.Getenv("AGENTPLANE_ENGINE_DIR")
	if dir == "" {
		testenv.Skip(t, "AGENTPLANE_ENGINE_DIR is not set (hack/install-engine.sh --print-dir)")
	}
	f := checkpointing(t, realEngine(t, dir))
	a := newAgent("ckpt-real")
	d := desired("tok-real")
	ctx := context.Background()
	var o runtime.Observed
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if o = ensure(t, f, a, d); o.Phase == runtime.PhaseRunning {
			break
		}
		if time.Now().After(deadline) || o.Phase == runtime.PhaseCrashed {
			t.Fatalf("the real gateway did not become healthy: %+v", o)
		}
	}
	cli := func(args ...string) string {
		t.Helper()
		res, err := f.rt.Exec(ctx, a, runtime.ExecRequest{Argv: args, Engine: true, Timeout: 2 * time.Minute})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("openclaw %s: %v: %+v", strings.Join(args, " "), err, res)
		}
		return string(res.Stdout)
	}
	cli("cron", "add", "--name", "ckpt-job", "--cron", "0 9 * * *", "--message", "good morning")
	before := fileLocks(t, gatewayPID(t, f, a))
	locks := walIndexLocks(before)
	if len(locks) == 0 {
		t.Fatalf("the running gateway holds no read lock on a SQLite WAL index; its locks:\n%s", strings.Join(before, "\n"))
	}
	r := suspendAndResume(t, f, a, d, nil)
	if r.Reason != agentsv1.ReasonRestoredFromCheckpoint {
		t.Fatalf("resume = %+v, want reason %s", r, agentsv1.ReasonRestoredFromCheckpoint)
	}
	waitPhase(t, f, a, d, runtime.PhaseRunning)
	// Every connection open before the suspend is open after the restore. The gateway may open
	// one more between the two reads (the agent's database, after the cron job's add: CI,
	// 2026-12-06), so the restored locks hold the earlier ones, not only them.
	after := fileLocks(t, gatewayPID(t, f, a))
	if lost := slices.DeleteFunc(slices.Clone(locks), func(l string) bool { return slices.Contains(walIndexLocks(after), l) }); len(lost) > 0 {
		t.Fatalf("the restored gateway lost the read locks on its SQLite WAL indexes it was dumped with:\n%s\nits locks now:\n%s", strings.Join(lost, "\n"), strings.Join(after, "\n"))
	}
	if n := gatewayStarts(t, f, a, "http server listening"); n != 1 {
		t.Fatalf("the gateway booted %d times, want once (restored, not restarted)", n)
	}
	if out := cli("cron", "list", "--json"); !strings.Contains(out, "ckpt-job") {
		t.Fatalf("cron list after the resume lacks the job: %s", out)
	}
	waitStatus(t, o.Endpoint, "tok-real", http.StatusNotFound)
}

// TestRealEngineCronFiresAfterRestore: a job due while the real gateway was checkpointed
// runs once it is restored (its timer is due on the restored gateway's clock), not one
// sleep-length late: the job's lastRunAtMs passes its due time. The job is a one-shot (`--at`):
// no later occurrence can pass for the missed one, however long the restored gateway takes to
// notice it.
func TestRealEngineCronFiresAfterRestore(t *testing.T) {
	dir := os.Getenv("AGENTPLANE_ENGINE_DIR")
	if dir == "" {
		testenv.Skip(t, "AGENTPLANE_ENGINE_DIR is not set (hack/install-engine.sh --print-dir)")
	}
	f := checkpointing(t, realEngine(t, dir))
	a := newAgent("ckpt-cron")
	d := desired("tok-real")
	ctx := context.Background()
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(f.rt.AgentDir(keyOf(a)), "gateway.log"))
			t.Logf("the gateway's log:\n%s", b)
		}
	})
	type job struct {
		ID    string `json:"id"`
		Name  string `json:"name"`
		State struct {
			LastRunAtMs int64 `json:"lastRunAtMs"`
		} `json:"state"`
	}
	cli := func(args ...string) []byte {
		t.Helper()
		res, err := f.rt.Exec(ctx, a, runtime.ExecRequest{Argv: args, Engine: true, Timeout: 2 * time.Minute})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%v: %v: %+v", args, err, res)
		}
		return res.Stdout
	}
	list := func() (job, bool) {
		t.Helper()
		var out struct{ Jobs []job }
		raw := cli("cron", "list", "--all", "--json")
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("cron list: %v: %s", err, raw)
		}
		for _, j := range out.Jobs {
			if j.Name == "once" {
				return j, true
			}
		}
		return job{}, false
	}
	waitPhase(t, f, a, d, runtime.PhaseRunning)
	// The job must fall due while the gateway is checkpointed: when the suspend outlasts the
	// lead (a loaded machine), the gateway comes back, the job goes and the next try leads by
	// twice as much.
	var due time.Time
	for lead := 30 * time.Second; ; lead *= 2 {
		due = time.Now().Add(lead).UTC().Truncate(time.Second)
		cli("cron", "add", "--name", "once", "--at", due.Format(time.RFC3339), "--keep-after-run", "--message", "tick")
		pid := gatewayPID(t, f, a)
		ensure(t, f, a, suspended(d))
		waitGone(t, pid)
		if time.Now().Before(due) {
			break
		}
		if lead > 4*time.Minute {
			t.Fatalf("the suspend never finished before the job's time (lead %s)", lead)
		}
		t.Logf("the suspend ended after the job's time (lead %s): again with a longer lead", lead)
		waitPhase(t, f, a, d, runtime.PhaseRunning)
		if j, ok := list(); ok {
			cli("cron", "remove", j.ID)
		}
	}
	// The time passes while the gateway is checkpointed (the event the test needs is the due
	// time itself).
	time.Sleep(time.Until(due.Add(time.Second)))
	if o := ensure(t, f, a, d); o.Reason != agentsv1.ReasonRestoredFromCheckpoint {
		t.Fatalf("resume = %+v", o)
	}
	restored := gatewayPID(t, f, a)
	waitPhase(t, f, a, d, runtime.PhaseRunning)
	for deadline := time.Now().Add(eventBound); ; time.Sleep(2 * time.Second) {
		if pid := gatewayPID(t, f, a); pid != restored {
			// The restored gateway died and the wake was a cold boot: the engine then defers
			// the missed job two minutes past its start, and what is tested here did not happen.
			t.Fatalf("the restored gateway (pid %d) did not last: pid %d now", restored, pid)
		}
		j, ok := list()
		t.Logf("after the restore: %+v (due %s)", j, due)
		if ok && j.State.LastRunAtMs >= due.UnixMilli() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job due at %s did not run after the restore: %+v", due, j)
		}
	}
}

// TestCheckpointsOffWhenTheTestCheckpointFails: a CRIU that passes `criu check` but cannot
// checkpoint and restore a real sandboxed tree (it hangs, as CRIU 4.1 did where the
// hypervisor ignores hardware breakpoints; it fails; its restored tree does not run; the
// restored process does not hold the lock it held on the file it maps, as with CRIU 4.1.1
// unpatched) turns checkpoints off when the runtime starts, and says why, instead of failing
// every suspend. The test sandbox leaves nothing behind.
func TestCheckpointsOffWhenTheTestCheckpointFails(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Skip(t, "checkpoints need root")
	}
	exe, err := os.Executable() // the test checkpoint's process (package lockprobe)
	if err != nil {
		t.Fatal(err)
	}
	const check = "#!/bin/sh\n[ \"$1\" = check ] && { echo 'Looks good.'; exit 0; }\n"
	// The real CRIU, after whose restore the probe's file is replaced by a copy nobody
	// locks: what the check sees when a restore dropped the lock.
	lockless := "#!/bin/sh\n" + strconv.Quote(criuPath(t)) + ` "$@" || exit $?
[ "$1" = restore ] || exit 0
while [ $# -gt 0 ]; do [ "$1" = -D ] && images=$2; shift; done
f=$(dirname "$images")/home/probe.db-shm
cp -p "$f" "$f.new" && mv "$f.new" "$f"
`
	for name, tc := range map[string]struct{ script, why string }{
		"a dump that hangs": {check + "exec sleep 300\n", "criu dump: signal: killed (cut off after 2s)"},
		"a restore that fails": {check + "[ \"$1\" = dump ] && exit 0\necho 'Error (cr-restore.c:1): no images' >&2\nexit 1\n",
			"criu restore: exit status 1"},
		"a restored tree that does not run": {check + "while [ $# -gt 0 ]; do [ \"$1\" = --pidfile ] && echo $$ > \"$2\"; shift; done\nexit 0\n",
			"the restored test sandbox does not run its process"},
		"a restore that drops a lock": {lockless, "does not hold the lock it held on a file it maps"},
	} {
		t.Run(name, func(t *testing.T) {
			criu := filepath.Join(t.TempDir(), "criu")
			if err := os.WriteFile(criu, []byte(tc.script), 0o755); err != nil {
				t.Fatal(err)
			}
			f := newFixture(t, func(o *local.Options) {
				o.Sandbox, o.CRIU, o.CRIUTimeout = local.SandboxRequired, criu, 2*time.Second
			})
			ok, why := f.rt.Checkpoints()
			if ok || !strings.Contains(why, "a test checkpoint of a sandboxed process failed") || !strings.Contains(why, tc.why) {
				t.Fatalf("checkpoints %v (%s), want off because %q", ok, why, tc.why)
			}
			if left, _ := filepath.Glob(filepath.Join(f.opts.StateDir, ".checkpoint-probe-*")); len(left) > 0 {
				t.Errorf("the test checkpoint's dir is left: %v", left)
			}
			if pids := processesRunning(exe + "\x00"); len(pids) > 0 {
				t.Errorf("the test sandbox's process still runs: %v", pids)
			}
		})
	}
}

// processesRunning are the live processes whose command line is cmdline (NUL-separated).
func processesRunning(cmdline string) []string {
	var pids []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && string(b) == cmdline {
			if st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil && !strings.Contains(string(st), ") Z ") {
				pids = append(pids, e.Name())
			}
		}
	}
	return pids
}

// A gateway restored from its checkpoint gets its network namespace served again: its
// commands reach the host services and, through the egress proxy, what a rule opens.
func TestRestoredGatewayKeepsItsWayOut(t *testing.T) {
	proxy := serveLoopback(t, "model proxy")
	opened := serveLoopback(t, "opened service")
	openedPort, _ := strconv.Atoi(opened[strings.LastIndexByte(opened, ':')+1:])
	f := checkpointing(t, func(o *local.Options) {
		o.HostServices = []string{proxy}
		o.Egress = []local.EgressRule{{Prefix: netip.MustParsePrefix("127.0.0.1/32"), Port: openedPort}}
	})
	if ok, why := f.rt.Networks(); !ok {
		t.Fatalf("no network namespace per agent: %s", why)
	}
	a := newAgent("ckpt-net")
	d := ckptDesired("tok-net")
	waitPhase(t, f, a, d, runtime.PhaseRunning)
	way := func(when string) {
		t.Helper()
		res, err := f.rt.Exec(context.Background(), a, runtime.ExecRequest{
			Argv:    []string{"sh", "-c", "curl -s --max-time 5 -w ' %{http_code}' http://" + proxy + "/; echo; curl -s --max-time 5 --noproxy '' -p -w ' %{http_code}' http://" + opened + "/"},
			Network: true, Timeout: 30 * time.Second,
		})
		if err != nil || strings.TrimSpace(string(res.Stdout)) != "model proxy 200\nopened service 200" {
			t.Fatalf("%s: the way out: %v %q %q", when, err, res.Stdout, res.Stderr)
		}
	}
	way("started")
	if r := suspendAndResume(t, f, a, d, nil); r.Reason != agentsv1.ReasonRestoredFromCheckpoint {
		t.Fatalf("resume = %+v, want reason %s", r, agentsv1.ReasonRestoredFromCheckpoint)
	}
	waitPhase(t, f, a, d, runtime.PhaseRunning)
	way("restored")
}

// TestALongSleeperKeepsItsCheckpointCompressed: once an agent has slept CheckpointPackAfter,
// its checkpoint's own pages are compressed (none left plain, less disk than its pages take),
// and its wake decompresses them and restores the same gateway, serving its token.
func TestALongSleeperKeepsItsCheckpointCompressed(t *testing.T) {
	f := checkpointing(t, func(o *local.Options) { o.CheckpointPackAfter = time.Nanosecond })
	a := newAgent("ckpt-packed")
	d := ckptDesired("tok-1")
	o := waitPhase(t, f, a, d, runtime.PhaseRunning)
	r := suspendAndResume(t, f, a, d, func(dir string) {
		waitPacked(t, dir)
		own, whole, err := local.CheckpointSize(dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("the packed checkpoint: %d KiB on disk, %d KiB whole", own>>10, whole>>10)
		if own >= whole {
			t.Fatalf("the packed checkpoint takes %d bytes, as much as whole (%d)", own, whole)
		}
	})
	if r.Reason != agentsv1.ReasonRestoredFromCheckpoint {
		t.Fatalf("resume = %+v, want reason %s", r, agentsv1.ReasonRestoredFromCheckpoint)
	}
	waitPhase(t, f, a, d, runtime.PhaseRunning)
	if n := gatewayStarts(t, f, a, "[gateway] listening on"); n != 1 {
		t.Fatalf("the gateway started %d times, want once (restored from the packed checkpoint)", n)
	}
	waitStatus(t, o.Endpoint, "tok-1", http.StatusNotFound)
}

// waitPacked waits until the checkpoint in dir keeps its pages compressed only: it looks
// again at each change of the dir's entries (a packed file renamed in, a plain one removed).
func waitPacked(t *testing.T, dir string) {
	t.Helper()
	w, err := fsnotify.NewWatcher()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Add(dir); err != nil {
		t.Fatal(err)
	}
	bound := time.After(eventBound)
	for {
		plain, _ := filepath.Glob(filepath.Join(dir, "pages-*.img"))
		packed, _ := filepath.Glob(filepath.Join(dir, "pages-*.img.zst"))
		if len(plain) == 0 && len(packed) > 0 {
			return
		}
		select {
		case <-w.Events:
		case err := <-w.Errors:
			t.Fatalf("watch %s: %v", dir, err)
		case <-bound:
			t.Fatalf("the checkpoint's pages were not compressed: %d files plain, %d packed", len(plain), len(packed))
		}
	}
}
