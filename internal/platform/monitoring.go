package platform

import (
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	agentctrl "github.com/agentplane/agentplane/controllers/agent"
	"github.com/agentplane/agentplane/internal/adapters/dnsverify"
	"github.com/agentplane/agentplane/internal/adapters/storage"
)

// Monitoring: the metrics the platform adds around its dependencies, on controller-runtime's
// registry (the manager's /metrics). README "Monitoring" lists them.

// instrumentFiles counts every storage operation (agentplane_storage_operations_total); every
// user of the files and snapshots storage (facade, controllers) gets the wrapped store.
func instrumentFiles(s storage.Store) storage.Store {
	return storage.Instrument(s, metrics.Registry)
}

// instrumentResolver counts the domain checks' TXT look-ups (agentplane_dns_lookups_total).
func instrumentResolver(r dnsverify.Resolver) dnsverify.Resolver {
	return dnsverify.Instrument(r, metrics.Registry)
}

// setupAgentMetrics makes agentplane_agents report from the manager's cache while it runs.
func (p *Platform) setupAgentMetrics() error {
	return p.Manager.Add(agentctrl.Metrics{Reader: p.Manager.GetCache()})
}
