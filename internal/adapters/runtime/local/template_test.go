package local_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/adapters/runtime/local"
	"github.com/agentplane/agentplane/internal/devtools/testenv"
)

// realTemplates builds a fixture over the real engine whose runtime gives new agents copies
// of their engine's template, with the checkout's reseed addon (make sandbox-packages) unless
// $AGENTPLANE_RESEED names one.
func realTemplates(t *testing.T, mutate ...func(*local.Options)) *fixture {
	t.Helper()
	dir := os.Getenv("AGENTPLANE_ENGINE_DIR")
	if dir == "" {
		testenv.Skip(t, "AGENTPLANE_ENGINE_DIR is not set (hack/install-engine.sh --print-dir)")
	}
	if os.Getenv(local.ReseedEnv) == "" {
		p, _ := filepath.Abs("../../../../bin/agentplane-reseed.node")
		if _, err := os.Stat(p); err != nil {
			testenv.Skip(t, "no reseed addon: set %s or run make sandbox-packages", local.ReseedEnv)
		}
		t.Setenv(local.ReseedEnv, p)
	}
	return checkpointing(t, append([]func(*local.Options){realEngine(t, dir), func(o *local.Options) {
		o.Templates = true
	}}, mutate...)...)
}

// waitTemplate waits until the engine's template is ready.
func waitTemplate(t *testing.T, f *fixture) {
	t.Helper()
	deadline := time.Now().Add(eventBound + 3*time.Minute) // a boot on a loaded machine, then the dump
	for {
		ok, why := f.rt.TemplateReady(version)
		if ok {
			return
		}
		if !strings.Contains(why, "being made") || time.Now().After(deadline) {
			t.Fatalf("no template: %s", why)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// instanceOf is what the copy's engine made for itself once it forgot its template's
// identity, read in the agent's sandbox from its state database: the HMAC key it signs config
// revisions with and the id of its boot.
func instanceOf(t *testing.T, f *fixture, a *agentsv1.Agent) string {
	t.Helper()
	const read = `const { DatabaseSync } = require('node:sqlite');
const db = new DatabaseSync(process.env.HOME + '/.openclaw/state/openclaw.sqlite', { readOnly: true });
const key = db.prepare('SELECT hex(hmac_key) AS k FROM config_revision_keys').all().map((r) => r.k).join(',');
const boots = db.prepare('SELECT boot_id AS b FROM gateway_boot_lifecycle').all().map((r) => r.b).join(',');
const check = db.prepare('PRAGMA integrity_check').all().map((r) => Object.values(r)[0]).join('; ');
if (check !== 'ok') { console.error('integrity_check: ' + check); process.exit(3); }
console.log(key + ' ' + boots);`
	var out string
	deadline := time.Now().Add(eventBound)
	for {
		res, err := f.rt.Exec(context.Background(), a, runtime.ExecRequest{Argv: []string{"node", "-e", read}, Timeout: time.Minute})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("read the copy's state (its database must be sound): %v %+v %s", err, res, res.Stderr)
		}
		if out = strings.TrimSpace(string(res.Stdout)); len(strings.Fields(out)) == 2 {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("the copy's engine made no HMAC key or boot record: %q", out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// templateInstanceRows counts, in the template's own state database (the one every copy's
// home starts from), the rows of the engine's instance reset's tables: the template forgot
// its instance before its dump, so none are left for a copy to restore.
func templateInstanceRows(t *testing.T, f *fixture) string {
	t.Helper()
	dbs, _ := filepath.Glob(filepath.Join(f.opts.StateDir, "templates", "*", "home", ".openclaw", "state", "openclaw.sqlite"))
	if len(dbs) != 1 {
		t.Fatalf("the template's state databases: %v", dbs)
	}
	const count = `const { DatabaseSync } = require('node:sqlite');
const db = new DatabaseSync(process.argv[1], { readOnly: true });
console.log(['device_identities', 'config_revision_keys', 'gateway_boot_lifecycle']
  .map((t) => t + '=' + db.prepare('SELECT count(*) AS n FROM ' + t).get().n).join(' '));`
	out, err := exec.Command(filepath.Join(os.Getenv("AGENTPLANE_ENGINE_DIR"), "bin", "node"), "-e", count, dbs[0]).CombinedOutput()
	if err != nil {
		t.Fatalf("read the template's state database: %v\n%s", err, out)
	}
	return strings.TrimSpace(string(out))
}

// mountedFrom are the processes that see a mount of a dir under the agent dir dir (a
// sandbox's root, its home): their mountinfo names it, as a path in its file system that ends
// with dir's path under the state dir.
func mountedFrom(f *fixture, dir string) []int {
	rel, err := filepath.Rel(f.opts.StateDir, dir)
	if err != nil {
		return nil
	}
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if mi, err := os.ReadFile("/proc/" + e.Name() + "/mountinfo"); err == nil && strings.Contains(string(mi), "/"+rel+"/") {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestNewAgentsAreBornFromTheTemplate: the first agent of an engine starts cold and says why
// (its template is being made); once the template is ready, each new agent's gateway is a copy
// of it, running with the agent's token and no other, as the agent's own uid, with the home
// and port every copy shares inside its own sandbox, and its console commands work there.
// Each copy forgot the template's identity: the HMAC key and boot id its engine made are its
// own (made after the thaw's reseed: copies that drew the same randomness would make the
// same key), and keeps it through a suspend (its own checkpoint) and a restart. A template
// whose image cannot be restored gives a cold start that says why.
func TestNewAgentsAreBornFromTheTemplate(t *testing.T) {
	f := realTemplates(t)
	first := newAgent("tpl-first")
	o := ensure(t, f, first, desired("tok-first"))
	if o.Reason != agentsv1.ReasonGatewayTemplateUnavailable || !strings.Contains(o.Message, "being made") {
		t.Fatalf("the first agent = %+v, want a cold start because the template is being made", o)
	}
	waitTemplate(t, f)
	if rows := templateInstanceRows(t, f); rows != "device_identities=0 config_revision_keys=0 gateway_boot_lifecycle=0" {
		t.Fatalf("the template's image keeps its instance's rows: %s", rows)
	}
	ctx := context.Background()
	seen := map[string]string{}
	pids := map[int]bool{}
	for i := range 2 {
		a, tok := newAgent("tpl-copy-"+strconv.Itoa(i)), "tok-copy-"+strconv.Itoa(i)
		// Ensure does not wait for the copy: it is made in the background, as a boot is.
		if o := ensure(t, f, a, desired(tok)); o.Phase != runtime.PhaseStarting || o.Reason != agentsv1.ReasonBornFromGatewayTemplate {
			t.Fatalf("agent %d = %+v, want Starting, being born from the template", i, o)
		}
		o := waitPhase(t, f, a, desired(tok), runtime.PhaseRunning)
		if o.Reason != agentsv1.ReasonBornFromGatewayTemplate || !strings.Contains(o.Message, "restored in") {
			t.Fatalf("agent %d = %+v, want Running, born from the template, with the restore's part of the time", i, o)
		}
		t.Logf("copy %d: %s", i, o.Message)
		waitStatus(t, o.Endpoint, tok, 404)
		if got := invoke(t, o.Endpoint, "tok-first"); got != 401 {
			t.Fatalf("copy %d accepts another agent's token: %d", i, got)
		}
		res, err := f.rt.Exec(ctx, a, runtime.ExecRequest{Argv: []string{"/bin/sh", "-c", "id -u; echo $HOME; pwd"}, Timeout: time.Minute})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("exec in copy %d: %v %+v", i, err, res)
		}
		lines := strings.Fields(string(res.Stdout))
		if len(lines) != 3 || lines[0] == "0" || lines[1] != "/home/node" || !strings.HasPrefix(lines[2], "/home/node") {
			t.Fatalf("exec in copy %d printed %q", i, res.Stdout)
		}
		if other, dup := seen[lines[0]]; dup {
			t.Fatalf("copies %s and %d run as the same uid %s", other, i, lines[0])
		}
		seen[lines[0]] = strconv.Itoa(i)
		id := instanceOf(t, f, a)
		if other, dup := seen[id]; dup {
			t.Fatalf("copies %s and %d share their engine's instance state %q", other, i, id)
		}
		seen[id] = strconv.Itoa(i)
		if len(mountedFrom(f, f.rt.AgentDir(types.NamespacedName{Namespace: a.Namespace, Name: a.Name}))) == 0 {
			t.Fatalf("copy %d's processes are not seen by their mounts (mountedFrom)", i)
		}
		pid := gatewayPID(t, f, a)
		if pids[pid] {
			t.Fatalf("two agents share gateway %d", pid)
		}
		pids[pid] = true
		// As a booted gateway does, the copy holds its SQLite WAL index's read lock: without
		// it the next process to open its database truncates the index under it.
		if locks := fileLocks(t, pid); len(walIndexLocks(locks)) == 0 {
			t.Fatalf("copy %d holds no read lock on its SQLite WAL index; its locks:\n%s", i, strings.Join(locks, "\n"))
		}
	}

	// A copy being made ends with its agent: deleted meanwhile, no process of it is left.
	gone := newAgent("tpl-deleted")
	if o := ensure(t, f, gone, desired("tok-deleted")); o.Reason != agentsv1.ReasonBornFromGatewayTemplate {
		t.Fatalf("agent = %+v, want a copy being made", o)
	}
	goneDir := f.rt.AgentDir(types.NamespacedName{Namespace: gone.Namespace, Name: gone.Name})
	if err := f.rt.Delete(ctx, gone); err != nil {
		t.Fatalf("delete an agent whose copy is being made: %v", err)
	}
	if pids := mountedFrom(f, goneDir); len(pids) > 0 {
		t.Fatalf("processes %v of a deleted agent's copy are left", pids)
	}

	// A copy's later life keeps its layout and its identity: suspended and woken it is
	// restored from its own checkpoint, and restarted for a new spec it boots in the same
	// sandbox layout, on the same state.
	a, d := newAgent("tpl-copy-0"), desired("tok-copy-0")
	before := instanceOf(t, f, a)
	r := suspendAndResume(t, f, a, d, thinnedAgainstTemplate(t))
	if r.Reason != agentsv1.ReasonRestoredFromCheckpoint {
		t.Fatalf("a copy's resume = %+v, want %s", r, agentsv1.ReasonRestoredFromCheckpoint)
	}
	// Its pages equal to the template's are in the parent image and still lazy: the page
	// server serves them from there (hack/criu/patches/0006; without it the restore waited
	// for them until cut off, then restored in full).
	restoredOnDemand(t, f, r)
	waitStatus(t, waitPhase(t, f, a, d, runtime.PhaseRunning).Endpoint, "tok-copy-0", 404)
	d.RestartNonce = "again"
	waitStatus(t, waitPhase(t, f, a, d, runtime.PhaseRunning).Endpoint, "tok-copy-0", 404)
	if after := instanceOf(t, f, a); strings.Fields(after)[0] != strings.Fields(before)[0] {
		t.Fatalf("a copy's engine lost its HMAC key through a suspend and a restart: %q, then %q", before, after)
	}

	// A template whose image is broken: the next agent boots and its status says why.
	broken, err := filepath.Glob(filepath.Join(f.opts.StateDir, "templates", "*", "image", "inventory.img"))
	if err != nil || len(broken) != 1 {
		t.Fatalf("the template's image: %v %v", broken, err)
	}
	if err := os.Truncate(broken[0], 0); err != nil {
		t.Fatal(err)
	}
	cold := newAgent("tpl-broken")
	ensure(t, f, cold, desired("tok-broken"))
	o = waitPhase(t, f, cold, desired("tok-broken"), runtime.PhaseRunning)
	if o.Reason != agentsv1.ReasonGatewayTemplateUnavailable || !strings.Contains(o.Message, "could not be restored") {
		t.Fatalf("an agent of a broken template = %+v, want a cold start that says the template could not be restored", o)
	}
	waitStatus(t, o.Endpoint, "tok-broken", 404)
}

// thinnedAgainstTemplate checks a suspended copy's checkpoint: it keeps in its own files
// only the pages that differ from its template's, the others are marked as in its parent image
// (links to the template's), so its restore (which follows) reads them there.
func thinnedAgainstTemplate(t *testing.T) func(dir string) {
	return func(dir string) {
		t.Helper()
		own, inParent, err := local.CheckpointPages(dir)
		if err != nil {
			t.Fatalf("read the copy's checkpoint: %v", err)
		}
		size, _, err := local.CheckpointSize(dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("the suspended copy's checkpoint: %d MiB on disk of its own, %d MiB of pages kept, %d MiB of pages its template's",
			size>>20, own>>20, inParent>>20)
		if inParent == 0 {
			t.Fatalf("the copy's checkpoint leaves no page to its template (%d MiB kept): it was not thinned", own>>20)
		}
	}
}

// TestPoolMembersAreBornFromTheTemplate: once its engine's template is ready, a warm pool's
// members are copies of it: an agent that claims one gets a gateway in the copies' layout
// (home at /home/node, its own uid), serving its token and no other, whose engine forgot the
// template's identity (two claims, two instances), and that keeps the layout through a
// restart. Nothing is left after the runtime's Shutdown.
func TestPoolMembersAreBornFromTheTemplate(t *testing.T) {
	stateDir := t.TempDir()
	t.Cleanup(func() { checkNoLeftovers(t, stateDir) }) // after the fixture's Shutdown
	f := realTemplates(t, func(o *local.Options) { o.StateDir = stateDir })
	if ok, why := f.rt.TemplateReady(version); ok || !strings.Contains(why, "being made") {
		t.Fatalf("template = %v %q, want one being made", ok, why)
	}
	waitTemplate(t, f)
	setPool(t, f, 1)
	ctx := context.Background()
	seen := map[string]bool{}
	for i := range 2 {
		waitPool(t, f, readyN(1))
		a, tok := newAgent("pool-copy-"+strconv.Itoa(i)), "tok-pool-copy-"+strconv.Itoa(i)
		o := ensure(t, f, a, desired(tok))
		if o.ClaimedFrom == "" || o.Phase != runtime.PhaseRunning {
			t.Fatalf("agent %d = %+v, want a claim of the pool's member", i, o)
		}
		waitStatus(t, o.Endpoint, tok, 404)
		res, err := f.rt.Exec(ctx, a, runtime.ExecRequest{Argv: []string{"/bin/sh", "-c", "id -u; echo $HOME"}, Timeout: time.Minute})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("exec in agent %d: %v %+v", i, err, res)
		}
		if out := strings.Fields(string(res.Stdout)); len(out) != 2 || out[0] == "0" || out[1] != "/home/node" {
			t.Fatalf("agent %d's member is not a copy of the template: exec printed %q", i, res.Stdout)
		}
		id := strings.Fields(instanceOf(t, f, a))[0]
		if seen[id] {
			t.Fatalf("two claimed copies share their engine's HMAC key %s", id)
		}
		seen[id] = true
	}
	a, d := newAgent("pool-copy-0"), desired("tok-pool-copy-0")
	d.RestartNonce = "again"
	waitStatus(t, waitPhase(t, f, a, d, runtime.PhaseRunning).Endpoint, "tok-pool-copy-0", 404)
	res, err := f.rt.Exec(ctx, a, runtime.ExecRequest{Argv: []string{"/bin/sh", "-c", "echo $HOME"}, Timeout: time.Minute})
	if err != nil || strings.TrimSpace(string(res.Stdout)) != "/home/node" {
		t.Fatalf("a claimed copy restarted left its layout: %v %q", err, res.Stdout)
	}
}
