package arch

import (
	"fmt"
	"go/build"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// shippedTags are the build tags of the shipped image's binary (Dockerfile): -tags nodevtools
// leaves out `agentplane dev` and `agentplane envtest-assets` (cmd/agentplane/devtools.go).
var shippedTags = []string{"nodevtools"}

// shippedPrograms are the commands the shipped images hold: the manager's image
// (cmd/agentplane) and the gateway image's probe.
var shippedPrograms = []string{"cmd/agentplane", "cmd/agentplane-probe"}

// TestShippedBuildCarriesNoDevTooling: built as the images build them, the shipped commands
// depend on nothing under internal/devtools (what builds, starts or fakes the world for make
// run and the tests).
func TestShippedBuildCarriesNoDevTooling(t *testing.T) {
	direct := importsTagged(t, shippedTags)
	for _, p := range shippedPrograms {
		if _, ok := direct[p]; !ok {
			t.Fatalf("%s not found: the layout changed, update shippedPrograms", p)
		}
		for _, v := range shippedViolations(direct, p) {
			t.Error(v)
		}
	}
}

// TestShippedBuildRuleFiresOnPlantedViolations: testdata/shipped reaches tooling in every
// build (images) and in a file only the shipped build keeps (localcluster); its file that the
// tag leaves out (devenv) is no violation.
func TestShippedBuildRuleFiresOnPlantedViolations(t *testing.T) {
	direct := importsTagged(t, shippedTags)
	own, err := ownImportsWith(buildContext(shippedTags), filepath.Join("testdata", "shipped"))
	if err != nil {
		t.Fatal(err)
	}
	direct["testdata/shipped"] = own
	got := shippedViolations(direct, "testdata/shipped")
	want := []string{
		"testdata/shipped depends on internal/devtools/images in the shipped build: the images carry no development tooling",
		"testdata/shipped depends on internal/devtools/localcluster in the shipped build: the images carry no development tooling",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// shippedViolations are program's dependencies under internal/devtools, sorted.
func shippedViolations(direct map[string][]string, program string) []string {
	var out []string
	for d := range deps(direct, program) {
		if under(d, "internal/devtools") {
			out = append(out, fmt.Sprintf("%s depends on %s in the shipped build: the images carry no development tooling", program, d))
		}
	}
	sort.Strings(out)
	return out
}

// TestCmdHoldsProgramsOnly: every package under cmd/ is a program (package main), which no
// other package can import: what commands share lives below them.
func TestCmdHoldsProgramsOnly(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(filepath.Join(root, "cmd"))
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for rel := range imports(t) {
		if !under(rel, "cmd") {
			continue
		}
		found++
		if v := cmdViolation(filepath.Join(root, rel), rel); v != "" {
			t.Error(v)
		}
	}
	if found == 0 || found < len(entries) {
		t.Fatalf("found %d packages under cmd/ for %d entries: the layout changed, update the rule", found, len(entries))
	}
}

// TestCmdRuleFiresOnPlantedViolation: testdata/cmdlib is a library, not a program.
func TestCmdRuleFiresOnPlantedViolation(t *testing.T) {
	if v := cmdViolation(filepath.Join("testdata", "cmdlib"), "cmd/cmdlib"); v != "cmd/cmdlib is package cmdlib: cmd/ holds programs only (package main); shared code lives below the commands" {
		t.Fatalf("violation %q", v)
	}
}

// cmdViolation is the refusal of the package in dir (rel under the module), or "".
func cmdViolation(dir, rel string) string {
	p, err := build.Default.ImportDir(dir, 0)
	if err != nil {
		return fmt.Sprintf("%s: %v", rel, err)
	}
	if p.Name != "main" {
		return fmt.Sprintf("%s is package %s: cmd/ holds programs only (package main); shared code lives below the commands", rel, p.Name)
	}
	return ""
}
