// agentplane's idle collector, preloaded in every Node thread and process of a gateway
// (runtime.GatewayNodeEnv): a full collection when the thread has been idle and its heap grew.
import v8 from 'node:v8';
import vm from 'node:vm';
import { performance } from 'node:perf_hooks';

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc');
v8.setFlagsFromString('--no-expose-gc');
const every = Number(process.env.AGENTPLANE_IDLE_GC_MS) || 10000;
let last = performance.eventLoopUtilization();
let kept = 0;
setInterval(() => {
  const now = performance.eventLoopUtilization();
  const busy = performance.eventLoopUtilization(now, last).utilization;
  last = now;
  if (busy < 0.05 && v8.getHeapStatistics().used_heap_size - kept >= 8 << 20) {
    gc();
    kept = v8.getHeapStatistics().used_heap_size;
  }
}, every).unref();
