package main

import (
	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/agentplane/agentplane/internal/platform"
	"github.com/agentplane/agentplane/internal/secrets"
)

func newManagerCommand() *cobra.Command {
	o := platform.Options{Runtime: platform.RuntimeOptions{Name: platform.RuntimeKube}}
	var storageDir, secretsKeyFile string
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
			if storageDir != "" {
				if o.Files, err = localStorage(storageDir); err != nil {
					return err
				}
			}
			if secretsKeyFile != "" {
				o.SecretsKey = secrets.FileKeySource{Path: secretsKeyFile}
			}
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
	cmd.Flags().StringVar(&o.Runtime.Name, "runtime", platform.RuntimeKube, "where agents run: kube (StatefulSets) or local (processes on this host)")
	cmd.Flags().StringSliceVar(&o.Runtime.Versions, "engine-versions", []string{"2026.9.6"}, "engine versions agents may run (kube runtime; their images must exist)")
	cmd.Flags().StringVar(&o.Runtime.DefaultVersion, "default-engine-version", "", "engine version of agents that name none (default: the newest offered)")
	cmd.Flags().StringVar(&o.Runtime.Image, "engine-image", "", "gateway image template, %s is the version (default ghcr.io/openclaw/openclaw:%s)")
	cmd.Flags().StringVar(&storageDir, "storage-dir", "", "directory for files and snapshots (local disk backend)")
	cmd.Flags().StringVar(&secretsKeyFile, "secrets-key-file", "", "file with the 32-byte secrets key (default: Secret agentplane-secrets-key in the system namespace)")
	return cmd
}

// addPlatformFlags declares the flags `manager` and `dev` share.
func addPlatformFlags(cmd *cobra.Command, o *platform.Options, apiAddr string) {
	f := cmd.Flags()
	f.StringVar(&o.APIAddr, "api-addr", apiAddr, "address of the REST facade")
	f.StringVar(&o.SystemNamespace, "system-namespace", platform.DefaultSystemNamespace, "namespace of the platform's own keys")
}
