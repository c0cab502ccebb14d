package platform

import (
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentplane/agentplane/config/crd"
	"github.com/agentplane/agentplane/controllers/storageversion"
)

// setupStorageMigration adds the storage migration: the leader, at start, moves the objects
// of every agentplane CRD still stored in an older version to the CRD's storage version.
func (p *Platform) setupStorageMigration() error {
	m, err := NewStorageMigrator(p.Manager.GetConfig(), p.Manager.GetClient(), p.Manager.GetAPIReader())
	if err != nil {
		return err
	}
	m.Log = p.opts.Log.WithName("storage-migration")
	return p.Manager.Add(m)
}

// NewStorageMigrator is the storage migration of agentplane's CRDs on cfg's cluster: it
// writes through c and reads through r (an uncached reader); `agentplane migrate-storage` runs
// it once.
func NewStorageMigrator(cfg *rest.Config, c client.Client, r client.Reader) (*storageversion.Migrator, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	crds, err := crd.CRDs()
	if err != nil {
		return nil, err
	}
	names := make([]string, len(crds))
	for i, d := range crds {
		names[i] = d.Name
	}
	return &storageversion.Migrator{Client: c, Reader: r, Discovery: dc, CRDs: names}, nil
}
