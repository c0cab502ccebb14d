package gatewaypool

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentplane/agentplane/internal/promreg"
)

// poolMetrics are the warm pools' metrics (controller-runtime's registry on /metrics).
type poolMetrics struct {
	// members: gateways of a pool by state (ready, booting), as the runtime last reported.
	members *prometheus.GaugeVec
	// claims: gateways handed to new agents.
	claims *prometheus.CounterVec
	// latency: from the start of a claim until the gateway served the agent's token.
	latency *prometheus.HistogramVec
}

func newPoolMetrics(reg prometheus.Registerer) *poolMetrics {
	return &poolMetrics{
		members: promreg.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "agentplane_gateway_pool_members",
			Help: "Warm gateways of a GatewayPool by state (ready: claimable; booting: not healthy yet).",
		}, []string{"pool", "state"})),
		claims: promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentplane_gateway_pool_claims_total",
			Help: "Warm gateways of a GatewayPool handed to new agents.",
		}, []string{"pool"})),
		latency: promreg.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "agentplane_gateway_pool_claim_duration_seconds",
			Help:    "Time from the start of a claim until the warm gateway served the new agent's token.",
			Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 1, 1.5, 2.5, 5, 10},
		}, []string{"pool"})),
	}
}

// forget drops a deleted pool's series.
func (m *poolMetrics) forget(pool string) {
	m.members.DeletePartialMatch(prometheus.Labels{"pool": pool})
	m.claims.DeleteLabelValues(pool)
	m.latency.DeleteLabelValues(pool)
}
