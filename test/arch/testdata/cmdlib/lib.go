// Package cmdlib plants a violation of the rule that cmd/ holds programs only
// (TestCmdRuleFiresOnPlantedViolation): a library under cmd/ would be code other packages
// reach into a command for.
package cmdlib

// Shared is what another command would import.
const Shared = "cmdlib"
