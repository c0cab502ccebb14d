package stress

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime/local"
)

// crashWindow is how long a crash-looping agent is watched.
const crashWindow = 10 * time.Second

// Bounds of the crash loop, from the local runtime's restart backoff (2 s, doubling): within
// crashWindow after the first crash the gateway is restarted restartsWithin(10 s, 2 s) = 2
// times (at +2 s and +6 s; the next is due at +14 s); one more is allowed for timing. Each
// start makes the runtime report at most 2 phase changes (starting, then not running), so the
// agent's status is written at most twice per start: maxStatusWrites allows double that, when
// a loop without backoff writes it hundreds of times in 10 s. The agent controller reconciles
// once per runtime notification (and at most once more per write of its own, were those not
// filtered); the count covers every agent of the platform, which are otherwise quiet:
// maxReconciles allows 4 per status write.
var (
	maxCrashRestarts = restartsWithin(crashWindow, local.DefaultBackoffInitial) + 1
	maxStatusWrites  = 2 * 2 * maxCrashRestarts
	maxReconciles    = 4 * maxStatusWrites
)

// restartsWithin is how many restarts a backoff starting at initial and doubling allows
// within window after a crash: the k-th comes initial·(2^k − 1) after it.
func restartsWithin(window, initial time.Duration) int {
	n := 0
	for d, sum := initial, initial; sum <= window; d, sum = 2*d, sum+2*d {
		n++
	}
	return n
}

// TestCrashLoopingEngine: creating an agent on an engine that crashes as soon as it starts
// answers 500 `Gateway failed to start` with the agent; the agent is listed, backs off
// instead of looping hot, and runs once restarted with a good version.
func TestCrashLoopingEngine(t *testing.T) {
	const ws = "crash-loop"
	workspace(t, ws, agentsv1.PlanFree)
	tok := token(t, ws)
	r := call(replicaURL, "POST", "/v0/agents", tok, map[string]any{"name": "phoenix", "engineVersion": versionCrash})
	if r.Status != 500 || r.errorMsg() != "Gateway failed to start" || r.obj("agent")["id"] == nil {
		t.Fatalf("create on a crashing engine: want 500 Gateway failed to start with the agent, got %s", r)
	}
	id := r.obj("agent")["id"].(string)
	list := expect(t, call(mainURL, "GET", "/v0/agents", tok, nil), 200, "list agents")
	listed := false
	for _, a := range list.Body["agents"].([]any) {
		listed = listed || a.(map[string]any)["id"] == id
	}
	if !listed {
		t.Fatalf("the crashed agent %s is not listed: %s", id, list.Raw)
	}

	writes, reconciles, restarts := watchCrashLoop(t, ws, id)
	t.Logf("in %s: %d status writes, %d agent reconciles (all agents), %d gateway restarts", crashWindow, writes, reconciles, restarts)
	switch {
	case restarts < 1 || restarts > maxCrashRestarts:
		t.Errorf("the gateway was restarted %d times in %s; the backoff allows 1 to %d", restarts, crashWindow, maxCrashRestarts)
	case writes > maxStatusWrites:
		t.Errorf("the agent's status was written %d times in %s (at most %d with the backoff)", writes, crashWindow, maxStatusWrites)
	case reconciles > maxReconciles:
		t.Errorf("the agent controller reconciled %d times in %s (at most %d with the backoff)", reconciles, crashWindow, maxReconciles)
	}

	r = expect(t, call(replicaURL, "POST", "/v0/agents/"+id+"/restart", tok, map[string]any{"version": versionGood}), 200, "restart with a good version")
	if r.obj("agent")["status"] != string(agentsv1.AgentRunning) {
		t.Fatalf("after the restart: %s", r)
	}
	if got := agentObject(t, ws, id).Status.Phase; got != agentsv1.AgentRunning {
		t.Fatalf("the agent is %s after the restart", got)
	}
}

// watchCrashLoop watches agent ns/id for crashWindow and returns how often its status was
// written, how often the agent controller reconciled (any agent) and how often the gateway
// was restarted.
func watchCrashLoop(t *testing.T, ns, id string) (writes, reconciles, restarts int) {
	t.Helper()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), crashWindow)
	defer cancel()
	w, err := wc.Watch(ctx, &agentsv1.AgentList{}, client.InNamespace(ns),
		client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", id)})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	before := agentReconciles(t)
	first := agentObject(t, ns, id).Status.Restarts
	last := first
	for done := false; !done; {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				done = true
				break
			}
			if a, isAgent := ev.Object.(*agentsv1.Agent); isAgent && ev.Type == watch.Modified {
				writes++
				last = a.Status.Restarts
			}
		case <-ctx.Done():
			done = true
		}
	}
	return writes, int(agentReconciles(t) - before), int(last - first)
}

// agentReconciles is controller-runtime's reconcile count of the agent controller
// (controller_runtime_reconcile_total{controller="agent"}, every result).
func agentReconciles(t *testing.T) float64 {
	t.Helper()
	return metricByLabel(t, "controller_runtime_reconcile_total", "controller")["agent"]
}
