package runtime_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/devtools/testenv"
)

// An idle gateway's threads give their garbage back: GatewayNodeEnv's NODE_OPTIONS preload
// the idle collector in the main thread and in workers, and no global gc is exposed to the
// agent's code. A real Node (the engine's, or the one on PATH), with V8's memory reducer off.
func TestGatewayNodeEnvCollectsIdleGarbage(t *testing.T) {
	node := nodeBinary(t)
	script := filepath.Join(t.TempDir(), "idle.js")
	if err := os.WriteFile(script, []byte(idleScript), 0o644); err != nil {
		t.Fatal(err)
	}
	// V8's own memory reducer off: it may collect such garbage by itself (not the engine's:
	// measured), and the test shows the collector's.
	cmd := exec.Command(node, "--no-memory-reducer", script)
	cmd.Env = append(os.Environ(), "AGENTPLANE_IDLE_GC_MS=500")
	for k, v := range runtime.GatewayNodeEnv(256) {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var threads map[string]struct {
		Before, After float64
		GlobalGC      string
	}
	if err := json.Unmarshal(out, &threads); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, name := range []string{"main", "worker"} {
		th, ok := threads[name]
		switch {
		case !ok:
			t.Errorf("no report from the %s thread: %s", name, out)
		case th.After >= th.Before/2:
			t.Errorf("the %s thread's idle heap stayed at %.0f MiB (%.0f MiB of garbage before)", name, th.After/(1<<20), th.Before/(1<<20))
		case th.GlobalGC != "undefined":
			t.Errorf("the %s thread's code sees a global gc (%s)", name, th.GlobalGC)
		}
	}
}

// idleScript makes about 40 MiB of garbage in the main thread and in a worker, then idles,
// polling its heap until it is under half of what it was (or 60 s passed), and prints each
// thread's heap before and after and whether its code sees a global gc.
const idleScript = `
const { Worker, isMainThread, parentPort } = require('node:worker_threads');
function run(done) {
  let junk = [];
  for (let i = 0; i < 200000; i++) junk.push({ i, s: 'x'.repeat(100) + i });
  junk = null;
  const before = process.memoryUsage().heapUsed, t0 = Date.now();
  const poll = setInterval(() => {
    const after = process.memoryUsage().heapUsed;
    if (after < before / 2 || Date.now() - t0 > 60000) {
      clearInterval(poll);
      done({ before, after, globalGC: typeof globalThis.gc });
    }
  }, 100);
}
if (isMainThread) {
  const out = {};
  const w = new Worker(__filename);
  w.on('message', (m) => { out.worker = m; });
  w.on('exit', () => run((m) => { out.main = m; console.log(JSON.stringify(out)); }));
} else {
  run((m) => parentPort.postMessage(m));
}
`

// nodeBinary is the engine's Node (AGENTPLANE_ENGINE_DIR) or the one on PATH.
func nodeBinary(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("AGENTPLANE_ENGINE_DIR"); dir != "" {
		return filepath.Join(dir, "bin", "node")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		testenv.Skip(t, "no Node: neither AGENTPLANE_ENGINE_DIR nor node on PATH")
	}
	return node
}

// Threads that start together all start: the collector's preload toggles a flag of the
// process, and a thread whose preload lost that race to another's threw "gc is not defined",
// which ended the thread (the engine starts several workers at once: an agent's turn failed
// "before reply" on the real engine). 32 workers at once, each must report.
func TestGatewayNodeEnvThreadsStartTogether(t *testing.T) {
	node := nodeBinary(t)
	script := filepath.Join(t.TempDir(), "together.js")
	if err := os.WriteFile(script, []byte(togetherScript), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, script)
	cmd.Env = os.Environ()
	for k, v := range runtime.GatewayNodeEnv(256) {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var got struct {
		OK     int
		Failed []string
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got.OK != 32 || len(got.Failed) != 0 {
		t.Fatalf("%d of 32 workers started; failures: %v", got.OK, got.Failed)
	}
}

// togetherScript starts 32 workers at once and prints how many reported and how the others
// failed.
const togetherScript = `
const { Worker, isMainThread, parentPort } = require('node:worker_threads');
if (isMainThread) {
  const out = { ok: 0, failed: [] };
  let left = 32;
  for (let i = 0; i < 32; i++) {
    const w = new Worker(__filename);
    w.on('message', () => { out.ok++; });
    w.on('error', (e) => { out.failed.push(String(e)); });
    w.on('exit', () => { if (--left === 0) console.log(JSON.stringify(out)); });
  }
} else {
  parentPort.postMessage('ok');
}
`

// The collector's rule for a round (idlegc.mjs's collectNow), with the real module in a real
// Node: an idle thread whose heap grew collects; a busy one, one that grew little, and one
// whose round comes late do not. A late round is a wake: the gateway's threads were stopped
// for the whole sleep (checkpointed), which their event loops count as idle, and every
// thread's round comes due at once while the wake's message is to be answered (measured on
// the real engine with hack/bench/wakes -asleep 25s: two or three threads collected 23-66 MiB
// each at every wake, and the answer came 1.1 s later at the median).
func TestGatewayNodeEnvCollectorRule(t *testing.T) {
	const mib = 1 << 20
	type round struct {
		Busy  float64 `json:"busy"`
		Grown int     `json:"grown"`
		Late  float64 `json:"late"`
	}
	cases := []struct {
		name    string
		r       round
		collect bool
	}{
		{"idle, grew", round{Busy: 0.01, Grown: 32 * mib, Late: 3}, true},
		{"idle, grew, a little late", round{Busy: 0.04, Grown: 8 * mib, Late: 900}, true},
		{"busy", round{Busy: 0.2, Grown: 32 * mib, Late: 3}, false},
		{"idle, grew little", round{Busy: 0.01, Grown: 7 * mib, Late: 3}, false},
		{"at a wake (the round late: the thread was stopped)", round{Busy: 0.01, Grown: 64 * mib, Late: 30000}, false},
		{"at a wake a second and a half late", round{Busy: 0.0, Grown: 64 * mib, Late: 1500}, false},
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "idlegc.mjs"), []byte(runtime.IdleGC), 0o644); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "rule.mjs")
	if err := os.WriteFile(script, []byte(ruleScript), 0o644); err != nil {
		t.Fatal(err)
	}
	rounds := make([]round, len(cases))
	for i, c := range cases {
		rounds[i] = c.r
	}
	in, err := json.Marshal(rounds)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(nodeBinary(t), script, string(in)).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var got []bool
	if err := json.Unmarshal(out, &got); err != nil || len(got) != len(cases) {
		t.Fatalf("%v: %s", err, out)
	}
	for i, c := range cases {
		if got[i] != c.collect {
			t.Errorf("%s (%+v): collects %v, want %v", c.name, c.r, got[i], c.collect)
		}
	}
}

// ruleScript prints collectNow's answer for each round of its argument (JSON).
const ruleScript = `
import { collectNow } from './idlegc.mjs';
console.log(JSON.stringify(JSON.parse(process.argv[2]).map(collectNow)));
`
