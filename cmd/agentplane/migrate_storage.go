package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentplane/agentplane/internal/platform"
	"github.com/agentplane/agentplane/internal/scheme"
)

func newMigrateStorageCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "migrate-storage",
		Short: "Rewrite agentplane's objects in their CRDs' storage version now (the manager's leader does it at start)",
		Long: `Rewrites every object of each agentplane CRD whose status.storedVersions lists a version
other than the storage version (a no-op update: the API server stores it in the storage
version), then sets storedVersions to the storage version alone. Run it after applying new
CRDs when no manager runs; it is safe beside one. See README "API versions".`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, c, err := kubeClient()
			if err != nil {
				return err
			}
			m, err := platform.NewStorageMigrator(cfg, c, c)
			if err != nil {
				return err
			}
			m.Log = ctrl.Log.WithName("storage-migration")
			if err := m.MigrateAll(cmd.Context()); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "every agentplane object is stored in its CRD's storage version")
			return nil
		},
	}
}

// kubeClient is a client of the cluster that controller-runtime's configuration names
// ($KUBECONFIG, ~/.kube/config or in-cluster), with agentplane's scheme, and its config.
func kubeClient() (*rest.Config, client.Client, error) {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return nil, nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	return cfg, c, err
}
