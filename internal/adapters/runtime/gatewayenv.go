package runtime

import (
	_ "embed"
	"fmt"
	"net/url"
	"strings"
)

// HeapShare is the part of a gateway's memory limit its Node heap may take
// (--max-old-space-size); the rest is for Node's other memory, the engine's child processes
// and the page cache. Without it V8 sizes its heap from the host's memory, not the
// container's or cgroup's, and the kernel's OOM killer ends the gateway before V8 collects.
const HeapShare = 0.75

// HeapMiB is the Node heap (MiB) of a gateway whose memory limit is limit bytes.
func HeapMiB(limit int64) int64 { return int64(float64(limit) * HeapShare / (1 << 20)) }

// GatewayNodeEnv is the environment both runtimes give an engine gateway (a Node process; the
// Node workers and child processes it starts inherit it) for a small idle footprint, with
// heapMiB the most its V8 old space may take (on kube a share of the container's memory
// limit, locally a runtime option). Measured on openclaw 2026.9.6 (hack/bench/coldstart,
// docs/BENCHMARKS.md): V8 lets the young generation of an idle gateway's main isolate and of
// each worker grow to semi-spaces of up to 64 MiB, resident and nearly empty once it is idle.
//
//   - --max-old-space-size: V8 sizes the old space from the host's memory otherwise (several
//     GiB); past it the gateway fails with an out-of-memory error instead of the host or the
//     container's cgroup swapping or killing it.
//
//   - --max-semi-space-size=4: young generations of 4 MiB semi-spaces: the idle gateway holds
//     about 170-200 MiB less (RSS), for about 8% more CPU at boot (more scavenges). 1 MiB saves
//     some 25 MiB more but cost up to 30% more CPU at boot; 8 MiB saved less.
//
//   - --import of the idle collector (idlegc.mjs, as a data: URL: no file to ship into a
//     sandbox or an image): in every thread and Node process of the gateway, every 10 s, a
//     full garbage collection when the thread's event loop was busy under 5% of that time and
//     its heap (V8's statistics: no /proc read) grew by 8 MiB or more since it last
//     collected. V8's own memory reducer leaves
//     the garbage of the engine's start in an idle gateway (measured: 40 s after /readyz, a
//     forced collection of every thread still gives back about 200 MiB of RSS); the
//     collector gives back most of it within a minute of idling, for one collection (well
//     under a second of CPU) per idle thread that grew. It takes gc from a fresh vm
//     context: the agent's code sees no global gc. A round more than a second late does
//     not collect: it is a wake from a checkpoint (the threads were stopped for the sleep,
//     which their event loops count as idle, and every thread's round is due at once). With
//     those collections (2-3 threads, 23-66 MiB each, at every wake) a Telegram message to
//     an agent asleep for 25 s was answered about a second later at the median
//     (hack/bench/wakes -asleep 25s).
//
// Not --v8-pool-size (fewer V8 background threads): 2 instead of Node's 4 saved no memory
// that could be measured and looked to cost CPU at boot; nor GLIBC_TUNABLES'
// glibc.malloc.arena_max=2 (the same).
//
// None of them changes V8's code cache tag (v8.cachedDataVersionTag), so the engine's compile
// cache stays valid. NODE_OPTIONS is reserved (secrets.IsReservedEnvName): no attached secret
// sets or overrides it.
func GatewayNodeEnv(heapMiB int64) map[string]string {
	return map[string]string{
		"NODE_OPTIONS": fmt.Sprintf("--max-old-space-size=%d --max-semi-space-size=4 --import=%s", heapMiB, idleGCImport),
	}
}

//go:embed idlegc.mjs
var idleGC string

// idleGCImport is idlegc.mjs as an --import URL (NodeImport).
var idleGCImport = NodeImport(idleGC)

// NodeImport is the ES module src, without its comment lines, as a data: URL for Node's
// --import, percent-encoded: no space or quote for NODE_OPTIONS to split on, and no file to
// ship into a sandbox or an image.
func NodeImport(src string) string {
	var code []string
	for _, l := range strings.Split(src, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "//") {
			code = append(code, l)
		}
	}
	return "data:text/javascript," + url.PathEscape(strings.Join(code, "\n"))
}
