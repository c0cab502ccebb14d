//go:build !nodevtools

package main

import (
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/agentplane/agentplane/internal/devtools/devenv"
)

// The development tooling this build carries: `agentplane dev` (the embedded local platform)
// and `agentplane envtest-assets`. The shipped image is built with -tags nodevtools, which
// leaves them out with everything under internal/devtools (devtools_off.go; test/arch checks
// the shipped build's imports).

// devtoolsCommands are the commands of the development tooling.
func devtoolsCommands() []*cobra.Command {
	return []*cobra.Command{newDevCommand(), newEnvtestAssetsCommand()}
}

// devPlatformEnv is what `agentplane dev` wrote for clients in the env file under stateDir
// (AGENTPLANE_URL, AGENTPLANE_TOKEN; a missing file reads as empty), and the hint that ends a
// client's refusal when neither flags nor the environment name the platform.
func devPlatformEnv(stateDir string) (env map[string]string, hint string) {
	file := filepath.Join(stateDir, devenv.EnvFileName)
	return devenv.ReadEnvFile(file), ", or start `agentplane dev` (it writes " + file + ")"
}

// registerDevStateDir adds the client commands' --state-dir: the state directory of
// `agentplane dev`, whose env file devPlatformEnv reads.
func registerDevStateDir(cmd *cobra.Command, dir *string) {
	cmd.PersistentFlags().StringVar(dir, "state-dir", ".agentplane", "state directory of `agentplane dev`, whose dev.env is read when --url or --token is not given")
}

// devEnvDefault is the end of a connection flag's default: the variable of dev's env file.
func devEnvDefault(variable string) string { return ", else " + variable + " of <state-dir>/dev.env" }
