package modelproxy

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics carry no per-agent label: a platform hosts 10,000 agents.
type metrics struct {
	requests *prometheus.CounterVec   // provider, code
	tokens   *prometheus.CounterVec   // provider, direction
	refusals *prometheus.CounterVec   // scope, kind
	latency  *prometheus.HistogramVec // provider
	streams  prometheus.Gauge
	// bodiesWaiting counts the requests waiting for room in the body budget.
	bodiesWaiting prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentplane_modelproxy_requests_total",
			Help: "Requests through the model proxy by provider and HTTP status (499: the client left first).",
		}, []string{"provider", "code"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentplane_modelproxy_tokens_total",
			Help: "Tokens the providers reported, by provider and direction (input, output).",
		}, []string{"provider", "direction"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentplane_modelproxy_budget_refusals_total",
			Help: "Requests refused by scope (agent, workspace) and kind (requests, tokens, spend: 429; unpriced: 403, a model without a price under a spend budget).",
		}, []string{"scope", "kind"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "agentplane_modelproxy_upstream_latency_seconds",
			Help:    "Time from forwarding a request to the provider's response headers, by provider.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
		}, []string{"provider"}),
		streams: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "agentplane_modelproxy_active_streams",
			Help: "Provider responses being relayed now.",
		}),
		bodiesWaiting: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "agentplane_modelproxy_bodies_waiting",
			Help: "Requests waiting for room to read their body (the proxy's bound on bodies held at once).",
		}),
	}
	if reg != nil {
		// Several proxies in one process (replicas in a test) share the series.
		var err error
		if m.requests, err = register(reg, m.requests); err != nil {
			return nil, err
		}
		if m.tokens, err = register(reg, m.tokens); err != nil {
			return nil, err
		}
		if m.refusals, err = register(reg, m.refusals); err != nil {
			return nil, err
		}
		if m.latency, err = register(reg, m.latency); err != nil {
			return nil, err
		}
		if m.streams, err = register(reg, m.streams); err != nil {
			return nil, err
		}
		if m.bodiesWaiting, err = register(reg, m.bodiesWaiting); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// register registers c, or returns the collector already registered under its name.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	var are prometheus.AlreadyRegisteredError
	switch {
	case err == nil:
		return c, nil
	case errors.As(err, &are):
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	return c, err
}
