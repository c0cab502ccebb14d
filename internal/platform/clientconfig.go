package platform

import "k8s.io/client-go/rest"

// The shipped client-side limit of the manager's requests to the Kubernetes API server
// (`agentplane manager --kube-api-qps --kube-api-burst`): none. The controllers go as fast as
// the API server lets them; the server's API Priority and Fairness (on by default) queues the
// manager's requests in the priority level its ServiceAccount falls into (workload-low, one
// flow among the cluster's other service accounts) and answers 429 with Retry-After when that
// level's queues are full, which client-go retries. A platform team that wants a client-side
// cap as well (a small or shared control plane) sets --kube-api-qps 50 --kube-api-burst 100.
const (
	DefaultAPIQPS   float32 = -1
	DefaultAPIBurst int     = 0
)

// DefaultAgentWorkers is how many agents `agentplane manager` reconciles at once
// (--agent-workers; the embedded platform's default, Options.AgentWorkers 0, stays 4). An
// Agent's first pass is a chain of requests, each waiting for the API server (its slot, the
// gateway token, the StatefulSet, its status), so the passes are bound by latency, not by the
// server: on the test control plane 500 agents take 0.67x as long with 16 workers as with 4,
// the same with 32, and concurrent passes share their slot reservations' writes (0.28 writes
// per agent against 0.83; docs/BENCHMARKS.md, issue 38).
const DefaultAgentWorkers = 16

// ClientConfig returns a copy of cfg with the manager's client-side limit: a negative qps
// turns client-go's token bucket off (cfg.QPS < 0), a positive one sets it with burst
// requests at once (0: twice qps); qps 0 keeps cfg's own QPS (and burst 0 its own Burst).
func ClientConfig(cfg *rest.Config, qps float32, burst int) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	switch {
	case qps < 0:
		cfg.QPS, cfg.Burst, cfg.RateLimiter = -1, 0, nil
		return cfg
	case qps > 0:
		cfg.QPS = qps
		if burst <= 0 {
			burst = max(1, int(2*qps))
		}
	}
	if burst > 0 {
		cfg.Burst = burst
	}
	return cfg
}
