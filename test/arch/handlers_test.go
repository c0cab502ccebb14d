package arch

import (
	"fmt"
	"go/ast"
	"go/types"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"
)

// TestHandlersCallOperations: the REST facade's handlers decode a request, call one operation
// of internal/ops and encode its result. Reading and writing kube-apiserver, running commands
// in an agent's home, and retrying conflicts is the operations' work, so the CLI and other
// doors get the same behaviour. The rule is on types: a use of an operation's dependency
// (ops.Deps' clients, runtime, engine, admission, sealer, file store) however it is reached,
// a method called on a value of one of their types however it was obtained, and client-go's
// retries. No file is exempt: authentication reads through an operation too (ops.AuthLookup).
func TestHandlersCallOperations(t *testing.T) {
	pkgs := loadModule(t, "facade")
	files := 0
	for _, p := range pkgs {
		files += len(p.Syntax)
	}
	if files < 20 {
		t.Fatalf("loaded %d files of the facade: the layout changed, update the rule", files)
	}
	for _, v := range handlerViolations(t, pkgs) {
		t.Errorf("%s: move it into an operation of internal/ops", v)
	}
}

// TestHandlerRuleFiresOnPlantedViolations: the rule finds each use planted in
// testdata/handlers (the client through the options, through the embedded field's name, the
// runtime held in a variable and returned by a helper, a client passed as a parameter,
// client-go's retry) at its line, and nothing on the lines a handler may write.
func TestHandlerRuleFiresOnPlantedViolations(t *testing.T) {
	dir := filepath.Join("testdata", "handlers")
	checkPlanted(t, dir, 5, handlerViolations(t, loadTyped(t, dir, ".")))
}

// operationDeps are the fields of ops.Deps only operations use.
var operationDeps = []string{"Client", "APIReader", "Informers", "Runtime", "Engine", "Admission", "Sealer", "Files"}

const (
	opsPath   = module + "/internal/ops"
	retryPath = "k8s.io/client-go/util/retry"
)

// handlerViolations lists, by position, each use in pkgs of an operation's dependency.
func handlerViolations(t *testing.T, pkgs []*packages.Package) []string {
	t.Helper()
	var out []string
	for _, p := range pkgs {
		fields, typs := depObjects(t, p.Types)
		for _, f := range p.Syntax {
			ast.Inspect(f, func(n ast.Node) bool {
				if what := depUse(p.TypesInfo, n, fields, typs); what != "" {
					out = append(out, fmt.Sprintf("%s: %s", position(p, n), what))
				}
				return true
			})
		}
	}
	return out
}

// depObjects are ops.Deps' operation fields and their types, as pkg (which imports
// internal/ops, directly or not) sees them; none when pkg does not depend on it.
func depObjects(t *testing.T, pkg *types.Package) (map[types.Object]bool, []types.Type) {
	t.Helper()
	opsPkg := findImport(pkg, opsPath, map[*types.Package]bool{})
	if opsPkg == nil {
		return nil, nil
	}
	st, ok := opsPkg.Scope().Lookup("Deps").Type().Underlying().(*types.Struct)
	if !ok {
		t.Fatal("ops.Deps is not a struct")
	}
	fields := map[types.Object]bool{}
	var typs []types.Type
	for i := range st.NumFields() {
		if f := st.Field(i); slices.Contains(operationDeps, f.Name()) {
			fields[f] = true
			typs = append(typs, f.Type())
		}
	}
	if len(fields) != len(operationDeps) {
		t.Fatalf("ops.Deps has %d of the fields %v: update the rule", len(fields), operationDeps)
	}
	return fields, typs
}

// findImport is the package of path among pkg's imports, transitively.
func findImport(pkg *types.Package, path string, seen map[*types.Package]bool) *types.Package {
	if pkg.Path() == path {
		return pkg
	}
	seen[pkg] = true
	for _, imp := range pkg.Imports() {
		if !seen[imp] {
			if found := findImport(imp, path, seen); found != nil {
				return found
			}
		}
	}
	return nil
}

// depUse says what n uses of the operations' dependencies, "" for nothing.
func depUse(info *types.Info, n ast.Node, fields map[types.Object]bool, typs []types.Type) string {
	sel, ok := n.(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	if o := info.Uses[sel.Sel]; o != nil && o.Pkg() != nil && o.Pkg().Path() == retryPath {
		return "client-go's " + "retry." + o.Name()
	}
	s := info.Selections[sel]
	if s == nil {
		return ""
	}
	if s.Kind() == types.FieldVal && fields[s.Obj()] {
		return "the operations' dependency " + s.Obj().Name()
	}
	if s.Kind() == types.MethodVal {
		recv := s.Recv()
		if p, ok := recv.(*types.Pointer); ok {
			recv = p.Elem()
		}
		for _, typ := range typs {
			if types.Identical(recv, typ) || types.Identical(types.NewPointer(recv), typ) {
				return fmt.Sprintf("%s called on a %s", s.Obj().Name(), strings.TrimPrefix(typ.String(), module+"/"))
			}
		}
	}
	return ""
}
