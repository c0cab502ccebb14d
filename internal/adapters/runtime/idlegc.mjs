// agentplane's idle collector, preloaded in every Node thread and process of a gateway
// (runtime.GatewayNodeEnv): a full collection when the thread has been idle and its heap grew.
import v8 from 'node:v8';
import vm from 'node:vm';
import { performance } from 'node:perf_hooks';

// The flag is the process's, and threads start together (the engine starts several workers
// at once): another thread may turn it off between this one's two steps, so the new context
// has no gc. Try again; a thread that never gets it goes without the collector. This module
// must never throw: a preload that throws ends its thread (an agent's turn, say).
let gc = null;
for (let i = 0; i < 100 && !gc; i++) {
  try {
    v8.setFlagsFromString('--expose-gc');
    gc = vm.runInNewContext('gc');
  } catch {
    gc = null;
  } finally {
    v8.setFlagsFromString('--no-expose-gc');
  }
}
const every = Number(process.env.AGENTPLANE_IDLE_GC_MS) || 10000;

// collectNow is the collector's rule for one round of a thread: busy is the share of the
// round its event loop was busy, grown how much its heap grew (bytes) since it last collected,
// late how long after its time the round came (ms). A round more than a second late comes
// after the thread was stopped (its gateway checkpointed: the agent slept), which its event
// loop counts as idle: at a wake every thread's round is due at once, while the message that
// woke the agent is to be answered. Such a round does not collect; the next one may.
export function collectNow({ busy, grown, late }) {
  return late <= 1000 && busy < 0.05 && grown >= 8 << 20;
}

let last = performance.eventLoopUtilization();
let due = performance.now() + every;
let kept = 0;
if (gc) setInterval(() => {
  const now = performance.eventLoopUtilization();
  const busy = performance.eventLoopUtilization(now, last).utilization;
  last = now;
  const t = performance.now();
  const late = t - due;
  due = t + every;
  if (collectNow({ busy, grown: v8.getHeapStatistics().used_heap_size - kept, late })) {
    gc();
    kept = v8.getHeapStatistics().used_heap_size;
  }
}, every).unref();
