package arch

import (
	"fmt"
	"go/ast"
	"go/types"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"
)

const statuspatchPath = module + "/internal/statuspatch"

// statusWriteHomes are the packages whose status writes need not be a statuspatch.Loop's
// Write, each with why.
var statusWriteHomes = map[string]string{
	"controllers":       "the reconcilers' one status write (PatchStatusIfChanged, which every reconciler reaches through its deferred controllers.PatchStatus): a pass computes a whole status and never retries in place",
	"hack/bench/agents": "the benchmark measures the reconcilers' write as they make it, one write per pass",
}

// loopViolations are the status writes of pkgs (found by the writer's type, as
// findStatusWrites does) made outside the packages homes names and outside the Write of a
// statuspatch.Loop: a status writer that is not a reconciler reads, changes, writes and
// retries through the one loop, never a loop of its own.
func loopViolations(pkgs []*packages.Package, homes map[string]string) []string {
	var out []string
	for _, p := range pkgs {
		rel := strings.TrimPrefix(strings.TrimPrefix(p.PkgPath, module), "/")
		if _, ok := homes[rel]; ok {
			continue
		}
		for _, f := range p.Syntax {
			var stack []ast.Node
			ast.Inspect(f, func(n ast.Node) bool {
				if n == nil {
					stack = stack[:len(stack)-1]
					return true
				}
				stack = append(stack, n)
				call, ok := n.(*ast.CallExpr)
				if ok && isWriterWrite(p.TypesInfo, call) && !onOtherSubresource(p.TypesInfo, call) && !inLoopWrite(p.TypesInfo, stack) {
					out = append(out, fmt.Sprintf("%s: a status write outside a statuspatch.Loop's Write (read, change, write and retry through statuspatch.Run)", position(p, call)))
				}
				return true
			})
		}
	}
	return out
}

// inLoopWrite: the innermost function literal of stack is the value of a statuspatch.Loop
// literal's Write field.
func inLoopWrite(info *types.Info, stack []ast.Node) bool {
	for i := len(stack) - 1; i >= 2; i-- {
		if _, ok := stack[i].(*ast.FuncLit); !ok {
			continue
		}
		kv, ok := stack[i-1].(*ast.KeyValueExpr)
		if !ok {
			return false
		}
		key, ok := kv.Key.(*ast.Ident)
		lit, ok2 := stack[i-2].(*ast.CompositeLit)
		if !ok || !ok2 || key.Name != "Write" {
			return false
		}
		named, ok := types.Unalias(info.TypeOf(lit)).(*types.Named)
		return ok && named.Obj().Pkg() != nil && named.Obj().Pkg().Path() == statuspatchPath && named.Obj().Name() == "Loop"
	}
	return false
}

// TestStatusWritersShareOneLoop: every status write of the module's shipped code is the
// reconcilers' one helper or the Write of a statuspatch.Loop.
func TestStatusWritersShareOneLoop(t *testing.T) {
	pkgs := loadModule(t, "")
	if n := len(findStatusWrites(pkgs)); n < 5 {
		t.Fatalf("found only %d status writes", n)
	}
	for _, v := range loopViolations(pkgs, statusWriteHomes) {
		t.Error(v)
	}
}

// TestStatusLoopRuleFiresOnPlantedViolations: the rule finds each hand-rolled status write
// planted in testdata/statusloops (a write in a loop of its own, in a function literal that is
// not a Loop's Write, in a Write of another type, in a helper a Write calls) at its line, and
// nothing on the writes made in a Loop's Write.
func TestStatusLoopRuleFiresOnPlantedViolations(t *testing.T) {
	dir := filepath.Join("testdata", "statusloops")
	checkPlanted(t, dir, 4, loopViolations(loadTyped(t, dir, "."), nil))
}
