package facade

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/engine"
	"github.com/agentplane/agentplane/internal/ops"
	"github.com/agentplane/agentplane/internal/scheme"
)

// BenchmarkFleet1000 reads and encodes the fleet of 1,000 agents (what the fleet page's first
// paint waits for: GET /v0/fleet/stream's snapshot) against the agent list the Agents page
// reads (GET /v0/agents), alternating in the same run, over the same in-memory client; and
// the size of a live update when one agent changes phase against the whole fleet. Run:
//
//	go test ./facade/ -run '^$' -bench BenchmarkFleet1000 -benchtime 20x
func BenchmarkFleet1000(b *testing.B) {
	const n = 1000
	objs := []client.Object{&agentsv1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: "ws"}}}
	start := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	for i := range n {
		objs = append(objs, &agentsv1.Agent{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: fmt.Sprintf("agt-%06d", i), UID: types.UID(fmt.Sprint(i)),
				CreationTimestamp: metav1.NewTime(start.Add(time.Duration(i) * time.Second))},
			Spec: agentsv1.AgentSpec{DisplayName: fmt.Sprintf("agent %d", i), Budget: &agentsv1.ModelBudget{TokensPerDay: 100000}},
			Status: agentsv1.AgentStatus{Phase: agentsv1.AgentRunning, EngineVersion: engine.PinnedVersion, Restarts: int32(i % 3),
				Usage: &agentsv1.ModelUsage{Day: "2026-11-30", Requests: int64(i), InputTokens: int64(i * 100)}},
		})
	}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).Build()
	o := ops.New(ops.Deps{Client: c, Now: func() time.Time { return start.Add(time.Hour) }})
	ctx, t := context.Background(), ops.Scope{Namespace: "ws"}
	var listTime, fleetTime time.Duration
	var listBytes, fleetBytes int
	for b.Loop() {
		t0 := time.Now()
		list, err := o.Agents(ctx, t)
		if err != nil {
			b.Fatal(err)
		}
		views := make([]agentView, 0, len(list))
		for i := range list {
			views = append(views, viewAgent(&list[i]))
		}
		raw, _ := json.Marshal(map[string]any{"agents": views})
		listTime += time.Since(t0)
		listBytes = len(raw)

		t0 = time.Now()
		f, err := o.Fleet(ctx, t, "ws")
		if err != nil {
			b.Fatal(err)
		}
		raw, _ = json.Marshal(viewFleet(f))
		fleetTime += time.Since(t0)
		fleetBytes = len(raw)
	}
	// One agent changes phase: the update event a stream sends.
	f, _ := o.Fleet(ctx, t, "ws")
	rec := httptest.NewRecorder()
	fs := &fleetSender{w: rec, rc: http.NewResponseController(rec), rows: map[string][]byte{}}
	fs.snapshot(viewFleet(f))
	snapshot := rec.Body.Len()
	f.Agents[500].Phase = agentsv1.AgentSuspended
	fs.update(viewFleet(f))
	update := rec.Body.Len() - snapshot

	b.ReportMetric(float64(fleetTime)/float64(listTime), "fleet/list-time")
	b.ReportMetric(float64(fleetBytes)/float64(listBytes), "fleet/list-bytes")
	b.ReportMetric(float64(fleetBytes), "fleet-bytes")
	b.ReportMetric(float64(listBytes), "list-bytes")
	b.ReportMetric(float64(update), "update-bytes")
	b.ReportMetric(float64(update)/float64(snapshot), "update/snapshot-bytes")
}
