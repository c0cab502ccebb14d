package main

import (
	"slices"
	"strings"
)

// tier is how much a package's tests need, lightest first.
type tier string

const (
	unit    tier = "unit"    // nothing but Go in the test's process: fake clients, table tests
	tools   tier = "tools"   // programs of this machine: the engine double, node and npm, helm, an S3 server, a binary built for the test
	envtest tier = "envtest" // a real kube-apiserver and etcd
	engine  tier = "engine"  // the real OpenClaw engine (Node 24), sandbox and CRIU where asked
	node    tier = "node"    // a real node: containerd, runc, the kubelet, kube-proxy (root)
)

var tiers = []tier{unit, tools, envtest, engine, node}

func validTier(s string) bool { return slices.Contains(tiers, tier(s)) }

// pkg is what `go list -json` tells of a package.
type pkg struct {
	ImportPath, Dir           string
	TestGoFiles, XTestGoFiles []string
	TestImports, XTestImports []string
}

const module = "github.com/agentplane/agentplane/"

// Imports of a package's tests that start something, by tier.
var startedBy = map[tier][]string{
	node:   {module + "internal/devtools/localcluster"},
	engine: {module + "test/e2e"},
	envtest: {
		module + "internal/devtools/testenv/kubeenv", module + "internal/platform",
		module + "pkg/agentplanetest", module + "pkg/agentplanetest/controlplane", module + "internal/devtools/controlplane/kit",
	},
	// A test that runs a program imports os/exec (or the engine double, whose bin/openclaw
	// its users run).
	tools: {"os/exec", module + "internal/devtools/fakeclaw"},
}

// engineMarkers name the real engine in a test's text: its install, or the variable make test
// passes its directory in.
var engineMarkers = []string{"AGENTPLANE_ENGINE_DIR", "install-engine.sh"}

// tierOf is the heaviest tier that p's tests (text: their source) start.
func tierOf(p pkg, text string) tier {
	imports := append(append([]string{}, p.TestImports...), p.XTestImports...)
	uses := func(t tier) bool {
		return slices.ContainsFunc(startedBy[t], func(s string) bool { return slices.Contains(imports, s) })
	}
	switch {
	case uses(node):
		return node
	case uses(engine) || slices.ContainsFunc(engineMarkers, func(m string) bool { return strings.Contains(text, m) }):
		return engine
	case uses(envtest):
		return envtest
	case uses(tools):
		return tools
	}
	return unit
}
