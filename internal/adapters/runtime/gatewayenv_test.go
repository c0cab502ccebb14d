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
