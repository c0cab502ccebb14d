//go:build !nodevtools

package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/agentplane/agentplane/internal/devtools/controlplane"
)

func newEnvtestAssetsCommand() *cobra.Command {
	var printDir bool
	cmd := &cobra.Command{
		Use:   "envtest-assets",
		Short: "Build kube-apiserver and etcd for envtest from the Go module proxy (once) and print their directory",
		Long: `envtest-assets builds the control plane that envtest (and agentplane dev) runs,
kube-apiserver ` + controlplane.KubernetesVersion() + ` and etcd, with the module versions this
binary embeds (the project's pins): it writes them into a temporary module and runs go build
there, so it needs the go command and the Go module proxy, nothing else. The binaries are
cached under the user cache dir ($AGENTPLANE_CACHE_DIR overrides), keyed by the pins and the Go
version; a second run only prints the directory. The first build takes about 10 minutes on
2 cores.`,
		Example: `  export KUBEBUILDER_ASSETS=$(go run github.com/agentplane/agentplane/cmd/agentplane@latest envtest-assets --print-dir)`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := controlplane.Builder{Log: cmd.ErrOrStderr()}.Ensure(cmd.Context())
			if err != nil {
				return err
			}
			if printDir {
				fmt.Fprintln(cmd.OutOrStdout(), dir)
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "export KUBEBUILDER_ASSETS=%s\n", dir)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&printDir, "print-dir", false, "print only the directory (for $(...) in scripts)")
	return cmd
}
