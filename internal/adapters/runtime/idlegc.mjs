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
let last = performance.eventLoopUtilization();
let kept = 0;
if (gc) setInterval(() => {
  const now = performance.eventLoopUtilization();
  const busy = performance.eventLoopUtilization(now, last).utilization;
  last = now;
  if (busy < 0.05 && v8.getHeapStatistics().used_heap_size - kept >= 8 << 20) {
    gc();
    kept = v8.getHeapStatistics().used_heap_size;
  }
}, every).unref();
