package main

import (
	"fmt"
	"strings"

	"github.com/agentplane/agentplane/hack/bench/internal/report"
)

// benches is every benchmark of the report, in the order of its tables.
var benches = []bench{
	program("coldstart", "Agent create and idle memory vs the bare engine (local runtime, real OpenClaw)",
		"The bare engine started by hand with its defaults, against an agent of the local runtime as the manager ships it: booted cold (an agent with secrets of its own) and born from its engine's template (every other new agent, as root with CRIU; the template made once before the rounds), each first in turn, in one run.",
		"./hack/bench/coldstart"),
	program("sandbox", "Local agent sandbox (bubblewrap), real OpenClaw",
		"The same runtime with and without its sandbox, alternating, each from a fresh state dir.",
		"./hack/bench/sandbox", "-n", "3", "-idle", "30s"),
	program("pool", "Warm gateway pool, suspend and resume (local runtime, real OpenClaw)",
		"POST /v0/agents to running plus one console exec: from a pool, cold, and a suspended agent's resume.",
		"./hack/bench/pool", "-n", "5"),
	rooted(program("checkpoint", "Checkpointed suspend and resume (local runtime, CRIU, real OpenClaw)",
		"An agent suspended with a checkpoint and resumed from it, its memory restored on demand as shipped, against the same agent suspended and resumed cold and against the same agent of a second runtime whose restores copy its memory in full first (EagerRestore), in rotating order; then new agents born from the engine's template, each suspended idle: its checkpoint's own disk (thinned against the template) against the same checkpoint whole, and its wake; then suspended again until its checkpoint is compressed (the runtime's CheckpointPackAfter, 30 s here; every other wake of the run comes well before it, as with the shipped 10 minutes): the same disk, and the wake from the compressed checkpoint against the plain one.",
		"./hack/bench/checkpoint", "-n", "3")),
	rooted(program("density", "A fleet mostly asleep, woken by its channels (local runtime, CRIU, templates, real OpenClaw)",
		"Agents born from the engine's template, each with a Telegram bot through the platform's relay and the fake provider's model behind the model proxy, all but two suspended (one of the awake ones busy); rounds a minute apart message three sleeping agents and the awake ones at once, then a burst messages every sleeping agent: a message's time to its answer from asleep against awake in the same rounds, wakes per second in the burst, the memory the fleet holds against the same agents all awake, and a sleeping agent's checkpoint on disk against the same checkpoint whole.",
		"./hack/bench/density", "-n", "12")),
	rooted(program("memmerge", "Awake agents with the kernel's same-page merging (local runtime, KSM, templates, real OpenClaw)",
		"Idle agents born from the engine's template, held with the runtime's MemoryMerge on (the kernel's merging daemon running, its scan rate raised) until the daemon has scanned them three times, against the same agents on a fresh platform as shipped (MemoryMerge off), held as long: their memory per agent, what their pages merged, and the daemon's CPU. Off by default: a merged page is a timing side channel between tenants.",
		"./hack/bench/memmerge", "-n", "6")),
	rooted(program("wakes", "Sleep and wake cycles on each channel kind (local runtime, CRIU, templates, real OpenClaw)",
		"One agent per channel kind (Telegram, Slack, Discord on fakes on loopback, through the platform's relay; the real engine's plugins), born from the engine's template, the fake provider's model behind the model proxy; the kinds side by side, each cycle a message awake (the baseline), a suspend (checkpointed), and a message asleep that the relay holds, wakes the agent for and delivers: a message's time to its answer from asleep against awake, and every message accounted for (late, lost, doubled).",
		"./hack/bench/wakes", "-cycles", "100")),
	program("agents-kube", "Agents to StatefulSets, the shipped manager (kube runtime, envtest)",
		"500 Agents until every StatefulSet exists, against the same objects from the same builders written directly by 8 writers.",
		"./hack/bench/agents", "-mode", "kube", "-n", "500"),
	withInput("AGENTPLANE_PEER_SRC", program("agents-peer", "The peer operator's shipped manager against agentplane's (envtest)",
		"openclaw-rocks/openclaw-operator's manager, built from a checkout of its source ($AGENTPLANE_PEER_SRC), with its binary's default flags: 500 OpenClawInstances until 500 StatefulSets exist, against agentplane's shipped manager with 500 Agents, on one control plane in the same run.",
		"./hack/bench/agents", "-mode", "peer", "-peer-src", "$AGENTPLANE_PEER_SRC", "-n", "500")),
	program("agents-kube-10000", "Ten thousand agents, the shipped manager (kube runtime, envtest)",
		"As above with 10,000 Agents: flat cost is the last tenth's time per agent against the first tenth's.",
		"./hack/bench/agents", "-mode", "kube", "-n", "10000"),
	program("agents-cost", "What each of the manager's requests costs the API server (envtest)",
		"Each kind of request the manager makes per agent, 500 of each from 8 writers, against as many Agent creates.",
		"./hack/bench/agents", "-mode", "cost", "-n", "500"),
	rooted(program("agents-kwok", "Agents running on 50 simulated (KWOK) nodes (kube runtime, local cluster)",
		"1,000 Agents until running, against the same objects applied directly until their pods are Ready.",
		"./hack/bench/agents", "-mode", "kwok", "-n", "1000", "-nodes", "50")),
	rooted(goBench("realnode-create", "Real node: REST create to running vs a bare pod (real OpenClaw)",
		"POST /v0/agents to running against a bare pod of the gateway's own template to Ready, alternating five times.",
		[]string{"-run", "^$", "-bench", "BenchmarkRealNodeCreate", "-benchtime", "5x", "-timeout", "30m", "./test/e2e/realnode/"},
		realNodeCreate)),
	rooted(goBench("realnode-memory", "Real node: memory per idle agent (real OpenClaw)",
		"Three idle agents against a bare pod of their own template, 30 s past start-up, from the kubelet's stats.",
		[]string{"-run", "^$", "-bench", "BenchmarkRealNodeMemory", "-benchtime", "1x", "-timeout", "30m", "./test/e2e/realnode/"},
		realNodeMemory)),
	program("signature", "Signature POST vs a raw API-server write",
		"POST /v3/files/{network}/{cid}/signature through the facade against a Get + Update of the File, same concurrency.",
		"./hack/bench/signature", "-n", "400", "-c", "8"),
	program("modelproxy", "Model credential proxy vs direct calls",
		"A fake OpenAI-style provider on loopback that answers at once, called through the proxy (real Authorizer, allow-list, reservations) and directly, in interleaved rounds: nothing hides what the proxy adds.",
		"./hack/bench/modelproxy", "-c", "32"),
	program("chat", "A chat turn's first token vs the provider's (engine double, model proxy)",
		"A fake OpenAI-style provider that thinks 50 ms before its first token, called directly and through POST /v0/agents/{id}/chat (facade, the engine double's gateway, the model proxy), alternating; each turn also measures the provider's first token to the chat's.",
		"./hack/bench/chat", "-n", "20"),
	program("load", "Mixed REST load against `agentplane dev` (fake engine)",
		"The contract's mix at a fixed rate against GET /healthz at the same rate; the facade's RSS over the repeats.",
		"./hack/bench/load", "-rate", "50", "-duration", "60s", "-repeats", "3"),
	program("fleet", "Console fleet page with 1,000 agents (chromium)",
		"Navigation until every agent is in: the fleet page (one stream, only the rows in view rendered) against the agent list page (every row in its table), alternating in one run, with 1,000 stopped agents; and GET /v0/fleet's bytes against GET /v0/agents'.",
		"./hack/bench/fleet", "-n", "1000", "-rounds", "5"),
	program("snapshot", "Snapshot sync vs sha256sum",
		"A 256 MiB workspace archived, its CID computed and stored with fsync, against sha256sum of the same files.",
		"./hack/bench/snapshot"),
	program("soak", "One hour of 20 idle agents and a busy one (local runtime, real OpenClaw)",
		"Memory over the soak against its first sample; OOM kills; and the idle agents this machine's available memory holds at the measured cost per agent.",
		"./hack/bench/soak", "-idle-agents", "20", "-duration", "1h"),
	goBench("cid", "CID computation (boxo, UnixFS)",
		"64 MiB imported as UnixFS, against Go's sha256 over the same bytes in the same benchmark.",
		[]string{"-run", "^$", "-bench", "BenchmarkCompute", "-benchtime", "5x", "./internal/adapters/cid/"},
		cidResults),
	goBench("tokens", "Token comparison in constant time",
		"internal/rules/auth.TokensEqual on 256 KiB tokens, interleaved medians against a guess that differs only in its last byte.",
		[]string{"-run", "^$", "-bench", "BenchmarkTokensEqual", "./test/stress/"},
		tokenResults),
}

func program(name, title, about, pkg string, args ...string) bench {
	cmd := strings.TrimSpace("go run " + pkg + " " + strings.Join(args, " "))
	return bench{Bench: report.Bench{Name: name, Title: title, About: about, Command: cmd}, args: append([]string{pkg}, args...)}
}

func goBench(name, title, about string, args []string, results func(map[string]map[string]float64) ([]report.Result, error)) bench {
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = a
		if strings.ContainsAny(a, "^$ ") {
			quoted[i] = "'" + a + "'"
		}
	}
	return bench{Bench: report.Bench{Name: name, Title: title, About: about, Command: "go test " + strings.Join(quoted, " ")},
		goTest: args, results: results}
}

// withInput leaves b out of runs without the environment variable env (see bench.input).
func withInput(env string, b bench) bench {
	b.input = env
	return b
}

func rooted(b bench) bench {
	b.root = true
	b.Command += " (root)"
	return b
}

// metrics returns benchmark name's metrics, failing when one of want is missing.
func metrics(all map[string]map[string]float64, name string, want ...string) (map[string]float64, error) {
	m, ok := all[name]
	if !ok {
		return nil, fmt.Errorf("no %s in the output", name)
	}
	for _, w := range want {
		if _, ok := m[w]; !ok {
			return nil, fmt.Errorf("%s reported no %s", name, w)
		}
	}
	return m, nil
}

func realNodeCreate(all map[string]map[string]float64) ([]report.Result, error) {
	m, err := metrics(all, "BenchmarkRealNodeCreate", "create-p50-s", "barepod-p50-s")
	if err != nil {
		return nil, err
	}
	return []report.Result{{Row: "p50 of 5", Metric: "POST /v0/agents to running", Value: m["create-p50-s"], Unit: "s",
		Baseline: "a bare pod of the same template to Ready", BaselineValue: m["barepod-p50-s"],
		Ratio: m["create-p50-s"] / m["barepod-p50-s"], RatioOf: "create / bare pod"}}, nil
}

func realNodeMemory(all map[string]map[string]float64) ([]report.Result, error) {
	m, err := metrics(all, "BenchmarkRealNodeMemory", "agent-workingset-MiB", "barepod-workingset-MiB", "shim-MiB", "kubelet+containerd-MiB")
	if err != nil {
		return nil, err
	}
	return []report.Result{
		{Row: "an idle agent", Metric: "pod working set", Value: m["agent-workingset-MiB"], Unit: "MiB",
			Baseline: "a bare pod of the same template", BaselineValue: m["barepod-workingset-MiB"],
			Ratio: m["agent-workingset-MiB"] / m["barepod-workingset-MiB"], RatioOf: "agent / bare pod"},
		{Row: "an idle agent", Metric: "its containerd shim", Value: m["shim-MiB"], Unit: "MiB"},
		{Row: "an idle agent", Metric: "kubelet and containerd growth", Value: m["kubelet+containerd-MiB"], Unit: "MiB"},
	}, nil
}

func cidResults(all map[string]map[string]float64) ([]report.Result, error) {
	m, err := metrics(all, "BenchmarkCompute", "MB/s", "sha256-MB/s", "x-sha256")
	if err != nil {
		return nil, err
	}
	return []report.Result{{Row: "64 MiB", Metric: "throughput", Value: m["MB/s"], Unit: "MB/s",
		Baseline: "sha256 of the same bytes", BaselineValue: m["sha256-MB/s"], Ratio: m["x-sha256"], RatioOf: "CID time / sha256 time"}}, nil
}

func tokenResults(all map[string]map[string]float64) ([]report.Result, error) {
	m, err := metrics(all, "BenchmarkTokensEqual", "baseline-ns", "first-byte/last-byte", "shorter/last-byte")
	if err != nil {
		return nil, err
	}
	base := m["baseline-ns"] / 1000
	var out []report.Result
	for _, c := range []struct{ metric, row string }{{"first-byte/last-byte", "the first byte differs"}, {"shorter/last-byte", "the guess is one byte shorter"}} {
		out = append(out, report.Result{Row: c.row, Metric: "median time", Value: base * m[c.metric], Unit: "µs",
			Baseline: "only the last byte differs", BaselineValue: base, Ratio: m[c.metric], RatioOf: "this case / baseline; about 1 when the time leaks nothing"})
	}
	return out, nil
}
