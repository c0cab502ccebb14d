package runtime

import "fmt"

// GatewayNodeEnv is the environment both runtimes give an engine gateway (a Node process and
// the Node workers and child processes it starts, which inherit it) for a small idle
// footprint, with heapMiB the most its V8 old space may take (on kube a share of the
// container's memory limit, locally a runtime option). Measured on openclaw 2026.9.6
// (hack/bench/coldstart): an idle gateway reserves a young generation of up to 64 MiB per
// semi-space in the main isolate and in each worker, nearly empty once it is idle.
//
//   - --max-old-space-size: V8 sizes the old space from the host's memory otherwise (several
//     GiB); past it the gateway fails with an out-of-memory error instead of the host or the
//     container's cgroup swapping or killing it.
//   - --max-semi-space-size=1: a young generation of 1 MiB semi-spaces. Short-lived objects are
//     collected more often (scavenges are cheap); the idle gateway holds about 120 MiB less.
//   - --v8-pool-size=2: V8's background threads (concurrent marking, compilation) are one per
//     core by default, on a large node dozens per gateway, each with its stack and malloc arena.
//   - GLIBC_TUNABLES=glibc.malloc.arena_max=2: glibc gives each thread that allocates its own
//     malloc arena (up to 8 per core), which keeps freed memory resident.
//
// None of them changes V8's code cache tag (v8.cachedDataVersionTag), so the engine's compile
// cache stays valid. Both names are reserved (secrets.IsReservedEnvName): no attached secret
// sets or overrides them.
func GatewayNodeEnv(heapMiB int64) map[string]string {
	return map[string]string{
		"NODE_OPTIONS":   fmt.Sprintf("--max-old-space-size=%d --max-semi-space-size=1 --v8-pool-size=2", heapMiB),
		"GLIBC_TUNABLES": "glibc.malloc.arena_max=2",
	}
}
