// Command agentplane hosts AI agents on Kubernetes.
//
//	agentplane manager   the controllers and the REST facade, in a cluster
//	agentplane dev       the embedded local platform (control plane, manager, local runtime)
//	agentplane token     mint API tokens
//	agentplane doctor    what disagrees between the API server, the runtime and storage (after a restore)
//	agentplane envtest-assets  build kube-apiserver and etcd for envtest (prints their directory)
//	agentplane agents|secrets|snapshots|logs  clients of the REST facade (pkg/client)
//
// dev and envtest-assets are development tooling: the shipped image is built with -tags
// nodevtools, which leaves them out (devtools.go).
package main

import (
	"os"

	"github.com/spf13/cobra"
	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

func main() {
	if err := newRootCommand().Execute(); err != nil {
		os.Exit(reportError(os.Stderr, err))
	}
}

func newRootCommand() *cobra.Command {
	var devLogs bool
	var verbosity int
	root := &cobra.Command{
		Use:           "agentplane",
		Short:         "Host AI agents (OpenClaw gateways) on Kubernetes",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRun: func(*cobra.Command, []string) {
			ctrl.SetLogger(zap.New(zap.UseDevMode(devLogs), zap.Level(zapcore.Level(-verbosity))))
		},
	}
	root.PersistentFlags().BoolVar(&devLogs, "log-dev", false, "human-readable console logs instead of JSON")
	root.PersistentFlags().IntVarP(&verbosity, "v", "v", 0, "log verbosity (0 = info, 1 = debug)")
	root.AddCommand(newManagerCommand(), newTokenCommand(),
		newAgentsCommand(), newSecretsCommand(), newSnapshotsCommand(), newLogsCommand(), newChatCommand(),
		newMigrateStorageCommand(), newDoctorCommand())
	root.AddCommand(devtoolsCommands()...)
	return root
}
