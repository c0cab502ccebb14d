package main

import (
	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/agentplane/agentplane/internal/platform"
)

func newManagerCommand() *cobra.Command {
	o := platform.Options{}
	cmd := &cobra.Command{
		Use:   "manager",
		Short: "Run the controllers and the REST facade (in a cluster)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := ctrl.SetupSignalHandler()
			cfg, err := ctrl.GetConfig()
			if err != nil {
				return err
			}
			o.Log = ctrl.Log
			p, err := platform.New(ctx, cfg, o)
			if err != nil {
				return err
			}
			return p.Start(ctx)
		},
	}
	addPlatformFlags(cmd, &o, ":8080")
	cmd.Flags().StringVar(&o.MetricsAddr, "metrics-bind-address", ":8443", "metrics endpoint address (0 disables)")
	cmd.Flags().StringVar(&o.ProbeAddr, "health-probe-bind-address", ":8081", "health and readiness probe address")
	cmd.Flags().BoolVar(&o.LeaderElection, "leader-elect", false, "run controllers on one replica at a time (the REST facade runs on all)")
	return cmd
}

// addPlatformFlags declares the flags `manager` and `dev` share.
func addPlatformFlags(cmd *cobra.Command, o *platform.Options, apiAddr string) {
	f := cmd.Flags()
	f.StringVar(&o.APIAddr, "api-addr", apiAddr, "address of the REST facade")
	f.StringVar(&o.SystemNamespace, "system-namespace", platform.DefaultSystemNamespace, "namespace of the platform's own keys")
}
