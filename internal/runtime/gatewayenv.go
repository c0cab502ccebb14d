package runtime

import "fmt"

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
//   - --max-semi-space-size=4: young generations of 4 MiB semi-spaces: the idle gateway holds
//     about 170-200 MiB less (RSS), for about 8% more CPU at boot (more scavenges). 1 MiB saves
//     some 25 MiB more but cost up to 30% more CPU at boot; 8 MiB saved less.
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
		"NODE_OPTIONS": fmt.Sprintf("--max-old-space-size=%d --max-semi-space-size=4", heapMiB),
	}
}
