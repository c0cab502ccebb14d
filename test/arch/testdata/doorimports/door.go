// Package doorimports plants a violation of the door's adapter rule
// (TestDoorAdapterRuleFiresOnPlantedViolation): it imports dnsverify directly, as the REST
// facade's domain view once did, besides what the rule allows (the operations, and the
// engine named in doorAdapterImports).
package doorimports

import (
	"github.com/agentplane/agentplane/internal/adapters/dnsverify"
	"github.com/agentplane/agentplane/internal/adapters/engine"
	"github.com/agentplane/agentplane/internal/ops"
)

var (
	_ = dnsverify.RecordName
	_ engine.Task
	_ ops.Scope
)
