//go:build nodevtools

package main

import "github.com/spf13/cobra"

// The shipped build (-tags nodevtools): no development tooling (devtools.go).

func devtoolsCommands() []*cobra.Command { return nil }

// devPlatformEnv finds nothing: without `agentplane dev` there is no dev platform to read.
func devPlatformEnv(string) (env map[string]string, hint string) { return nil, "" }

// registerDevStateDir adds nothing: the shipped build's clients read no dev platform's state.
func registerDevStateDir(*cobra.Command, *string) {}

// devEnvDefault is empty: a connection flag has no dev env file to default to.
func devEnvDefault(string) string { return "" }
