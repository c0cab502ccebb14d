// Command shipped plants violations of the shipped build's rule
// (TestShippedBuildRuleFiresOnPlantedViolations): in the build the image makes (-tags
// nodevtools) it still reaches development tooling: in every build (images, below) and in a
// file only that build has (localcluster, kept.go).
package main

import (
	"github.com/agentplane/agentplane/internal/devtools/images"
	"github.com/agentplane/agentplane/internal/platform"
)

var (
	_ = images.Probe
	_ platform.Options
)

func main() {}
