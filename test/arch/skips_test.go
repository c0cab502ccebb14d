package arch

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestSkipsGoThroughTestenv: a test that cannot run here (no root, no engine, a skip switch
// such as AGENTPLANE_SKIP_REAL_ENGINE or -short) says so with testenv.Skip, which fails it
// under CI=true instead: CI honours no skip switch. A direct t.Skip would hide a gap in CI.
func TestSkipsGoThroughTestenv(t *testing.T) {
	root := filepath.Join("..", "..")
	skips, files := directSkips(t, root, filepath.Join(root, "internal", "devtools", "testenv", "skip.go"))
	if files < 100 {
		t.Fatalf("read only %d Go files", files)
	}
	for _, s := range skips {
		t.Error(s)
	}
}

// TestSkipRuleFiresOnPlantedViolations: over testdata/skips the rule reports a test's, a
// benchmark's and a helper's direct skips at their lines, and not a skip through testenv.
func TestSkipRuleFiresOnPlantedViolations(t *testing.T) {
	dir := filepath.Join("testdata", "skips")
	skips, _ := directSkips(t, dir, "")
	checkPlanted(t, dir, 3, skips)
}

// directSkips are the skips in root's Go files (testdata and examples aside) that do not go
// through testenv, but those of the file allowed (testenv's own), and how many files it read.
func directSkips(t *testing.T, root, allowed string) ([]string, int) {
	t.Helper()
	fset := token.NewFileSet()
	var out []string
	keep := func(path string) bool { return strings.HasSuffix(path, ".go") && path != allowed }
	files := walkFiles(t, root, true, []string{".git", "node_modules", "examples", "testdata", "bin"}, keep, func(path string) error {
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			switch sel.Sel.Name {
			case "Skip", "Skipf", "SkipNow":
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "testenv" {
					return true
				}
				out = append(out, fmt.Sprintf("%s: %s.%s: skip with testenv.Skip (it fails under CI=true)", fset.Position(call.Pos()), exprName(sel.X), sel.Sel.Name))
			}
			return true
		})
		return nil
	})
	return out, files
}

func exprName(e ast.Expr) string {
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return "?"
}
