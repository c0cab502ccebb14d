// Package arch checks the module's structural rules: the two doors (the REST facade and the
// controllers) share vocabulary through api/v1alpha1 and behaviour through internal
// packages, never through each other; the REST facade imports no adapter directly (it calls
// operations); every test skip goes through testenv.Skip; every status write names its
// field manager (one writer per status field) and, outside the reconcilers' one helper, is
// the write of a statuspatch loop; no function is over 80 lines (declarative tables aside,
// each named with why). Each rule is also run over violations planted for it (testdata, or an
// import graph) and must report each one and nothing else.
package arch

import (
	"errors"
	"fmt"
	"go/build"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/agentplane/agentplane"

// rules: the packages matching from (a prefix) must not depend, directly or not, on any
// package matching one of the forbidden prefixes. Test code is not covered: integration
// suites may start the whole platform.
var rules = []struct {
	from      string
	forbidden []string
	why       string
}{
	{"controllers", []string{"facade"}, "controllers never import the REST facade"},
	{"facade", []string{"controllers", "internal/platform"}, "the REST facade never imports the controllers"},
	{"api/", []string{"facade", "controllers", "internal/"}, "the API types depend on nothing of agentplane"},
	{"internal/", []string{"facade", "controllers"}, "shared packages sit below both doors (only internal/platform wires them)"},
	{"internal/", []string{"pkg/"}, "the public packages are built on the internal ones, never under them"},
	{"internal/ops", []string{"internal/platform", "internal/devtools"}, "the operations sit below the wiring and run without development tooling"},
	{"internal/rules", []string{"internal/ops", "internal/platform", "internal/devtools", "internal/adapters"}, "rules decide and adapters act: rules sit below the adapters (which may apply them) and the operations, and run without development tooling"},
	{"internal/adapters", []string{"internal/ops", "internal/platform", "internal/devtools"}, "adapters sit below the operations and run without development tooling"},
	{"controllers", []string{"internal/devtools"}, "the controllers run without development tooling"},
	{"facade", []string{"internal/devtools"}, "the REST facade runs without development tooling"},
	{"pkg/client", []string{"internal/", "api/", "facade", "controllers"}, "the REST client is the contract's alone: any program can use it without the platform's code"},
}

// exempt packages wire both doors together.
var exempt = map[string]bool{"internal/platform": true}

// imports reads every package of the module with go/build, in this process, so that the
// files it reads key the test cache (an exec'd `go list` would not) and returns each
// package's direct imports of the module's own packages (test files excluded).
func imports(t *testing.T) map[string][]string {
	t.Helper()
	return importsTagged(t, nil)
}

// buildContext is go/build's default context with the build tags tags.
func buildContext(tags []string) build.Context {
	ctx := build.Default
	ctx.BuildTags = append(append([]string{}, ctx.BuildTags...), tags...)
	return ctx
}

// importsTagged is imports as a build with the tags tags sees the packages.
func importsTagged(t *testing.T, tags []string) map[string][]string {
	t.Helper()
	ctx := buildContext(tags)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" || name == "bin") {
			return filepath.SkipDir
		}
		if path != root {
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // another module (hack/tools/...)
			}
		}
		own, err := ownImportsWith(ctx, path)
		if err != nil {
			var noGo *build.NoGoError
			if errors.As(err, &noGo) {
				return nil
			}
			return fmt.Errorf("%s: %w", path, err)
		}
		rel, _ := filepath.Rel(root, path)
		out[filepath.ToSlash(rel)] = own
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// ownImports are the direct imports of the module's packages by the package in dir (test
// files excluded), relative to the module.
func ownImports(dir string) ([]string, error) {
	return ownImportsWith(build.Default, dir)
}

// ownImportsWith is ownImports in the build context ctx.
func ownImportsWith(ctx build.Context, dir string) ([]string, error) {
	p, err := ctx.ImportDir(dir, 0)
	if err != nil {
		return nil, err
	}
	var own []string
	for _, imp := range p.Imports {
		if strings.HasPrefix(imp, module+"/") {
			own = append(own, strings.TrimPrefix(imp, module+"/"))
		}
	}
	return own, nil
}

// deps is the transitive closure of direct over the module's packages.
func deps(direct map[string][]string, from string) map[string]bool {
	seen := map[string]bool{}
	stack := append([]string{}, direct[from]...)
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[p] {
			continue
		}
		seen[p] = true
		stack = append(stack, direct[p]...)
	}
	return seen
}

func TestImportRules(t *testing.T) {
	direct := imports(t)
	if len(direct) < 10 {
		t.Fatalf("found only %d packages", len(direct))
	}
	for _, v := range importViolations(direct) {
		t.Error(v)
	}
}

// importViolations checks every rule over the import graph direct (each package's direct
// imports of the module's packages): a dependency a rule forbids, or a rule that matched no
// package (the layout changed under it).
func importViolations(direct map[string][]string) []string {
	var out []string
	checked := map[string]int{}
	for rel := range direct {
		if exempt[rel] {
			continue
		}
		for _, r := range rules {
			if !under(rel, r.from) {
				continue
			}
			checked[r.from]++
			for d := range deps(direct, rel) {
				for _, f := range r.forbidden {
					if under(d, f) && !exempt[d] && !under(d, r.from) {
						out = append(out, fmt.Sprintf("%s depends on %s: %s", rel, d, r.why))
					}
				}
			}
		}
	}
	for _, r := range rules {
		if checked[r.from] == 0 {
			out = append(out, fmt.Sprintf("rule %q matched no package: the layout changed, update the rule", r.from))
		}
	}
	return out
}

// TestImportRulesFireOnPlantedViolations: over a graph of the module's layout that keeps
// every rule, each rule fails on an import planted against it (directly or through another
// package), and nothing else is reported.
func TestImportRulesFireOnPlantedViolations(t *testing.T) {
	legal := map[string][]string{
		"api/v1alpha1": nil, "facade": {"internal/ops", "api/v1alpha1"}, "controllers": {"internal/adapters/runtime"},
		"controllers/agent": {"controllers"}, "internal/ops": {"internal/rules/quota", "internal/adapters/runtime"},
		"internal/rules/quota": {"api/v1alpha1"}, "internal/adapters/runtime": {"api/v1alpha1"},
		"internal/platform": {"facade", "controllers", "internal/devtools/images"}, "internal/devtools/images": nil,
		"internal/adapters/modelproxy/kubeaccess": {"internal/rules/quota"}, "pkg/client": nil,
	}
	if v := importViolations(legal); len(v) > 0 {
		t.Fatalf("the legal graph breaks rules: %v", v)
	}
	for _, r := range rules {
		for _, f := range r.forbidden {
			if exempt[f] {
				continue
			}
			// A package under the rule's prefix imports, through a middle package, a package
			// the rule forbids (a path through the exempt wiring counts as the path it
			// continues on).
			from, bad := concrete(r.from, "internal/rules/planted"), concrete(f, "internal/ops")
			graph := map[string][]string{}
			for k, v := range legal {
				graph[k] = append([]string{}, v...)
			}
			graph[from] = append(graph[from], "planted/middle")
			graph["planted/middle"] = []string{bad}
			found := false
			for _, v := range importViolations(graph) {
				if strings.HasPrefix(v, from+" depends on "+bad+": ") {
					found = true
				}
			}
			if !found {
				t.Errorf("rule %q (%s) did not fire on %s importing %s: %v", r.from, r.why, from, bad, importViolations(graph))
			}
		}
	}
}

// concrete is a package that prefix names: itself, or for a prefix of every package under a
// dir ("internal/", "api/") the given one.
func concrete(prefix, under string) string {
	switch prefix {
	case "internal/":
		return under
	case "api/":
		return "api/v1alpha1"
	}
	return prefix
}

// TestControllerPackagesStandAlone: each kind's controller is a package under controllers/
// (controllers/agent, controllers/domain...) that shares code with the others only through the
// parent package controllers (the status patch, the field indexes and their mappers, what
// several kinds read of Channels); no controller package depends on another one, and the
// parent depends on none of them.
func TestControllerPackagesStandAlone(t *testing.T) {
	direct := imports(t)
	found := 0
	for rel := range direct {
		if under(rel, "controllers") {
			found++
		}
	}
	if found < 2 {
		t.Errorf("found %d packages under controllers: the layout changed, update the test", found)
	}
	for _, v := range controllerViolations(direct) {
		t.Error(v)
	}
}

// controllerViolations are the dependencies in the import graph direct of a package under
// controllers on a controller package (but the parent).
func controllerViolations(direct map[string][]string) []string {
	var out []string
	for rel := range direct {
		if !under(rel, "controllers") {
			continue
		}
		for d := range deps(direct, rel) {
			if under(d, "controllers") && d != "controllers" {
				out = append(out, fmt.Sprintf("%s depends on %s: controller packages share code only through package controllers", rel, d))
			}
		}
	}
	sort.Strings(out)
	return out
}

// TestControllerRuleFiresOnPlantedViolations: over a graph of controller packages that keeps
// the rule (each imports the parent and the layers below), a controller importing another
// directly, one importing another through a shared package, and the parent importing a
// controller are each reported, and nothing else.
func TestControllerRuleFiresOnPlantedViolations(t *testing.T) {
	legal := map[string][]string{
		"controllers": {"internal/adapters/runtime"}, "controllers/agent": {"controllers", "internal/ops"},
		"controllers/domain": {"controllers"}, "controllers/task": {"controllers", "internal/adapters/runtime"},
		"controllers/gc": {"internal/adapters/runtime"},
		"internal/ops":   {"internal/adapters/runtime"}, "internal/adapters/runtime": nil,
	}
	if v := controllerViolations(legal); len(v) > 0 {
		t.Fatalf("the legal graph breaks the rule: %v", v)
	}
	for _, c := range []struct {
		from, imports string
		want          []string
	}{
		{"controllers/agent", "controllers/domain", []string{"controllers/agent depends on controllers/domain"}},
		{"internal/ops", "controllers/task", []string{"controllers/agent depends on controllers/task"}},
		{"controllers", "controllers/gc", []string{
			"controllers depends on controllers/gc", "controllers/agent depends on controllers/gc",
			"controllers/domain depends on controllers/gc", "controllers/task depends on controllers/gc",
		}},
	} {
		graph := map[string][]string{}
		for k, v := range legal {
			graph[k] = append([]string{}, v...)
		}
		graph[c.from] = append(graph[c.from], c.imports)
		var got []string
		for _, v := range controllerViolations(graph) {
			got = append(got, strings.SplitN(v, ":", 2)[0])
		}
		sort.Strings(c.want)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s importing %s: reported %q, want %q", c.from, c.imports, got, c.want)
		}
	}
}

// under reports whether rel is the package prefix or below it ("internal/" matches every
// package under internal; "controllers" matches controllers and controllers/...).
func under(rel, prefix string) bool {
	if strings.HasSuffix(prefix, "/") {
		return strings.HasPrefix(rel, prefix)
	}
	return rel == prefix || strings.HasPrefix(rel, prefix+"/")
}

// doorAdapterImports are the adapters the REST facade may import directly, each with why.
// Otherwise it calls operations (internal/ops), which reach the adapters for it: the rule is
// on direct imports, since every operation depends on adapters.
var doorAdapterImports = map[string]string{
	"internal/adapters/engine": "the task and device shapes the REST API shows are the engine's own types (engine.Task, Schedule, Payload, Devices), decoded and reflected into the OpenAPI document",
}

// TestDoorImportsNoAdapters: the REST facade's packages import no adapter but those
// doorAdapterImports names.
func TestDoorImportsNoAdapters(t *testing.T) {
	found := 0
	for rel, own := range imports(t) {
		if under(rel, "facade") {
			found++
			for _, v := range doorAdapterViolations(rel, own) {
				t.Error(v)
			}
		}
	}
	if found == 0 {
		t.Fatal("no package under facade: the layout changed, update the rule")
	}
}

// doorAdapterViolations are the imports (own, of the module's packages) of package rel that
// the door's adapter rule refuses.
func doorAdapterViolations(rel string, own []string) []string {
	var out []string
	for _, imp := range own {
		if under(imp, "internal/adapters") && doorAdapterImports[imp] == "" {
			out = append(out, fmt.Sprintf("%s imports %s: the REST facade calls operations (internal/ops), never an adapter", rel, imp))
		}
	}
	return out
}

// TestDoorAdapterRuleFiresOnPlantedViolation: the package in testdata/doorimports imports
// dnsverify directly, besides the operations and the engine; the rule reports dnsverify, and
// nothing else.
func TestDoorAdapterRuleFiresOnPlantedViolation(t *testing.T) {
	own, err := ownImports(filepath.Join("testdata", "doorimports"))
	if err != nil {
		t.Fatal(err)
	}
	v := doorAdapterViolations("doorimports", own)
	if len(v) != 1 || !strings.HasPrefix(v[0], "doorimports imports internal/adapters/dnsverify: ") {
		t.Fatalf("violations %q, want dnsverify's alone", v)
	}
}
