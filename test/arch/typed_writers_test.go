package arch

import (
	"fmt"
	"go/ast"
	"go/constant"
	"go/types"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/tools/go/packages"
)

const crClient = "sigs.k8s.io/controller-runtime/pkg/client"

// statusWrite is a call of a status writer's write method found by its type.
type statusWrite struct {
	pos     string // file:line
	pkg     string // the package, relative to the module
	manager string // the api/v1alpha1 constant named by client.FieldOwner, "" when none
	problem string // what is wrong with the owner argument, "" when it names a constant
}

// typedMode loads a package's syntax and types (its dependencies' from their export data).
const typedMode = packages.NeedName | packages.NeedFiles | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo

// loadTyped loads patterns (non-test files) from dir with their types.
func loadTyped(t *testing.T, dir string, patterns ...string) []*packages.Package {
	t.Helper()
	pkgs, err := packages.Load(&packages.Config{Mode: typedMode, Dir: dir}, patterns...)
	return checkLoaded(t, pkgs, err)
}

// moduleTyped is the whole module with its types, loaded once for the rules that read all of
// it: each load type-checks every package of the module from source (seconds of CPU).
var moduleTyped = sync.OnceValues(func() ([]*packages.Package, error) {
	return packages.Load(&packages.Config{Mode: typedMode, Dir: filepath.Join("..", "..")}, "./...")
})

// loadModule is the module's packages with their types; under, when given, keeps those of
// that directory of the module and below.
func loadModule(t *testing.T, under string) []*packages.Package {
	t.Helper()
	pkgs, err := moduleTyped()
	pkgs = checkLoaded(t, pkgs, err)
	if under == "" {
		return pkgs
	}
	var kept []*packages.Package
	for _, p := range pkgs {
		if p.PkgPath == module+"/"+under || strings.HasPrefix(p.PkgPath, module+"/"+under+"/") {
			kept = append(kept, p)
		}
	}
	return kept
}

// checkLoaded fails the test on a load error and reports each package's errors.
func checkLoaded(t *testing.T, pkgs []*packages.Package, err error) []*packages.Package {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pkgs {
		for _, e := range p.Errors {
			t.Errorf("load %s: %v", p.PkgPath, e)
		}
	}
	return pkgs
}

// findStatusWrites lists every Create, Update, Patch or Apply called on a
// client.SubResourceWriter (what Status() and SubResource("status") return, also when held
// in a variable or returned by a helper), but those on SubResource(<another constant>).
func findStatusWrites(pkgs []*packages.Package) []statusWrite {
	var out []statusWrite
	for _, p := range pkgs {
		rel := strings.TrimPrefix(strings.TrimPrefix(p.PkgPath, module), "/")
		for _, f := range p.Syntax {
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || !isWriterWrite(p.TypesInfo, call) || onOtherSubresource(p.TypesInfo, call) {
					return true
				}
				w := statusWrite{pos: position(p, call), pkg: rel}
				w.manager, w.problem = fieldOwner(p.TypesInfo, call)
				out = append(out, w)
				return true
			})
		}
	}
	return out
}

// isWriterWrite: call is M(...) with M a write method of client.SubResourceWriter.
func isWriterWrite(info *types.Info, call *ast.CallExpr) bool {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	s := info.Selections[sel]
	if s == nil || !slices.Contains([]string{"Create", "Update", "Patch", "Apply"}, sel.Sel.Name) {
		return false
	}
	fn, ok := s.Obj().(*types.Func)
	if !ok {
		return false
	}
	recv := fn.Type().(*types.Signature).Recv()
	if recv == nil {
		return false
	}
	named, ok := types.Unalias(recv.Type()).(*types.Named)
	return ok && named.Obj().Pkg() != nil && named.Obj().Pkg().Path() == crClient && named.Obj().Name() == "SubResourceWriter"
}

// onOtherSubresource: call is X.SubResource(c).M(...) with c a constant other than "status".
func onOtherSubresource(info *types.Info, call *ast.CallExpr) bool {
	inner, ok := call.Fun.(*ast.SelectorExpr).X.(*ast.CallExpr)
	if !ok || len(inner.Args) != 1 {
		return false
	}
	if isel, ok := inner.Fun.(*ast.SelectorExpr); !ok || isel.Sel.Name != "SubResource" {
		return false
	}
	tv := info.Types[inner.Args[0]]
	return tv.Value != nil && tv.Value.Kind() == constant.String && constant.StringVal(tv.Value) != "status"
}

// fieldOwner is the api/v1alpha1 constant that call passes as client.FieldOwner(...).
func fieldOwner(info *types.Info, call *ast.CallExpr) (string, string) {
	for _, arg := range call.Args {
		owner, ok := arg.(*ast.CallExpr)
		if !ok || len(owner.Args) != 1 || !names(info, owner.Fun, crClient, "FieldOwner") {
			continue
		}
		var id *ast.Ident
		switch e := owner.Args[0].(type) {
		case *ast.SelectorExpr:
			id = e.Sel
		case *ast.Ident:
			id = e
		}
		if id == nil {
			return "", "the field owner is not a named constant"
		}
		c, ok := info.Uses[id].(*types.Const)
		if !ok || c.Pkg() == nil || c.Pkg().Path() != apiPath {
			return "", "the field owner is not a constant of api/v1alpha1"
		}
		return c.Name(), ""
	}
	return "", "no client.FieldOwner(agentsv1.<manager>) argument"
}

// names: e names the object name of package path (client.FieldOwner is a type: the owner
// argument is a conversion).
func names(info *types.Info, e ast.Expr, path, name string) bool {
	var id *ast.Ident
	switch e := e.(type) {
	case *ast.SelectorExpr:
		id = e.Sel
	case *ast.Ident:
		id = e
	default:
		return false
	}
	o := info.Uses[id]
	return o != nil && o.Pkg() != nil && o.Pkg().Path() == path && o.Name() == name
}

func position(p *packages.Package, n ast.Node) string {
	pos := p.Fset.Position(n.Pos())
	return fmt.Sprintf("%s:%d", filepath.Base(pos.Filename), pos.Line)
}

// ownerViolations are the writes that do not name a documented manager or are outside the
// packages the table assigns theirs to.
func ownerViolations(writes []statusWrite, docs map[string]documentedManager) []string {
	var out []string
	for _, w := range writes {
		switch d, ok := docs[w.manager]; {
		case w.problem != "":
			out = append(out, fmt.Sprintf("%s: %s", w.pos, w.problem))
		case !ok:
			out = append(out, fmt.Sprintf("%s: field manager %s is not in docs/ARCHITECTURE.md's table", w.pos, w.manager))
		case !slices.Contains(d.packages, w.pkg):
			out = append(out, fmt.Sprintf("%s: %s writes status as %s, which docs/ARCHITECTURE.md assigns to %v", w.pos, w.pkg, w.manager, d.packages))
		}
	}
	return out
}

// TestStatusWritesByType is TestStatusWritersNameTheirManager's rule checked on types, not
// text: every status write of the module's shipped code (found by the writer's type, however
// the writer was obtained) names a documented field manager, from a package the table assigns
// it to.
func TestStatusWritesByType(t *testing.T) {
	docs := readManagerTable(t, filepath.Join("..", "..", "docs", "ARCHITECTURE.md"))
	writes := findStatusWrites(loadModule(t, ""))
	if len(writes) < 3 {
		t.Fatalf("found only %d status writes", len(writes))
	}
	for _, v := range ownerViolations(writes, docs) {
		t.Error(v)
	}
}

// wantMarker is a planted violation's comment: `// want: <what the rule says>`.
var wantMarker = regexp.MustCompile(`// want: (.+)$`)

// TestStatusWriteRuleFiresOnPlantedViolations: the rule finds each violation planted in
// testdata/statuswrites (a writer held in a variable, one returned by a helper, an owner that
// is a string, an undocumented constant, a write outside the manager's packages, none at all)
// at its line, and nothing on the lines that are correct.
func TestStatusWriteRuleFiresOnPlantedViolations(t *testing.T) {
	docs := map[string]documentedManager{
		"ControllerFieldManager": {packages: []string{"test/arch/testdata/statuswrites"}},
		"QuotaFieldManager":      {packages: []string{"internal/rules/quota"}},
	}
	dir := filepath.Join("testdata", "statuswrites")
	checkPlanted(t, dir, 5, ownerViolations(findStatusWrites(loadTyped(t, dir, ".")), docs))
}
