package agent

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// Agent metrics, on controller-runtime's registry (the manager's /metrics). None carries a
// per-agent or per-workspace label: a platform hosts 10,000 agents.
var (
	provisionDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "agentplane_agent_provision_duration_seconds",
		Help:    "Time from an agent's creation until its gateway first answered its health check (phase running).",
		Buckets: []float64{1, 2, 5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300, 600, 1200},
	})
	agentsDesc = prometheus.NewDesc("agentplane_agents",
		"Agents by phase (starting, running, not_running, suspended), from the manager's cache at scrape time.",
		[]string{"phase"}, nil)
	agentsFailedDesc = prometheus.NewDesc("agentplane_agents_failed",
		"Agents whose gateway should run but does not: phase not_running while spec.stopped is false (crashed, failed to provision).",
		nil, nil)
	agentsByPhase = &agentCollector{}
)

func init() { crmetrics.Registry.MustRegister(provisionDuration, agentsByPhase) }

// observeFirstRunning records the provisioning latency when this status write is the agent's
// first move to running: it never slept, crashed or was restarted, and its Ready condition was
// never True before (it is absent, or False since the agent was first provisioned). A gateway
// that crashed, was stopped, restarted or slept and runs again does not count again.
func observeFirstRunning(agent, before *agentsv1.Agent, now time.Time) {
	if agent.Status.Phase != agentsv1.AgentRunning || before.Status.Phase == agentsv1.AgentRunning {
		return
	}
	st := &before.Status
	if st.Restarts > 0 || st.LastRestartAt != nil || st.Sleep != nil && (st.Sleep.SuspendedAt != nil || st.Sleep.WokenAt != nil) {
		return
	}
	if ready := meta.FindStatusCondition(before.Status.Conditions, agentsv1.ConditionReady); ready != nil {
		prov := meta.FindStatusCondition(before.Status.Conditions, agentsv1.AgentProvisioned)
		if ready.Status == metav1.ConditionTrue || prov == nil || ready.LastTransitionTime.After(prov.LastTransitionTime.Time) {
			return
		}
	}
	provisionDuration.Observe(now.Sub(agent.CreationTimestamp.Time).Seconds())
}

// agentCollector counts the cached Agents by phase at scrape time (no API call). One process
// may run several platforms (tests): the one whose manager started last reports.
type agentCollector struct {
	mu sync.Mutex
	// source is the reader of the running manager (nil: none runs).
	source *agentSource
}

// agentSource is one manager's reader, compared by identity.
type agentSource struct{ reader client.Reader }

// Metrics is a manager Runnable that makes agentplane_agents report from Reader (the
// manager's cache) while the manager runs. It runs on every replica, leader or not: each
// reports the same numbers from its own cache.
type Metrics struct {
	Reader client.Reader
}

// Start reports from Reader until ctx ends.
func (a Metrics) Start(ctx context.Context) error {
	src := &agentSource{reader: a.Reader}
	agentsByPhase.swap(nil, src)
	<-ctx.Done()
	agentsByPhase.swap(src, nil)
	return nil
}

// NeedLeaderElection: every replica reports.
func (Metrics) NeedLeaderElection() bool { return false }

// swap makes next the source: always when old is nil, else only while old is the source (a
// manager that stops does not clear the source of one that started after it).
func (c *agentCollector) swap(old, next *agentSource) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old == nil || c.source == old {
		c.source = next
	}
}

func (c *agentCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- agentsDesc
	ch <- agentsFailedDesc
}

func (c *agentCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	src := c.source
	c.mu.Unlock()
	if src == nil {
		return // no manager runs: nothing is known (absent, not zero)
	}
	r := src.reader
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var list agentsv1.AgentList
	// Read-only: the cache's objects are not copied.
	if err := r.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		// The cache is not synced yet: the series are absent from this scrape (an invalid
		// metric would fail the whole scrape, every other series with it).
		return
	}
	counts := map[agentsv1.AgentPhase]int{
		agentsv1.AgentStarting: 0, agentsv1.AgentRunning: 0, agentsv1.AgentNotRunning: 0, agentsv1.AgentSuspended: 0,
	}
	failed := 0
	for i := range list.Items {
		a := &list.Items[i]
		phase := a.Status.Phase
		if phase == "" {
			phase = agentsv1.AgentStarting // not reconciled yet
		}
		counts[phase]++
		if phase == agentsv1.AgentNotRunning && !a.Spec.Stopped {
			failed++
		}
	}
	for phase, n := range counts {
		ch <- prometheus.MustNewConstMetric(agentsDesc, prometheus.GaugeValue, float64(n), string(phase))
	}
	ch <- prometheus.MustNewConstMetric(agentsFailedDesc, prometheus.GaugeValue, float64(failed))
}
