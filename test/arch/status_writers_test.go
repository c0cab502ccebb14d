package arch

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const apiPath = module + "/api/v1alpha1"

// documentedManager is a row of docs/ARCHITECTURE.md's field manager table.
type documentedManager struct {
	value    string
	packages []string
}

// TestStatusWritersNameTheirManager: every status write outside tests (a Status() or
// SubResource("status") client's Update, Patch, Apply or Create) names its field manager with
// client.FieldOwner(agentsv1.<constant>), the constant is one of the managers
// docs/ARCHITECTURE.md documents, and every use of a manager constant is in a package the
// table assigns to it. So each status field has the one writer the table names.
func TestStatusWritersNameTheirManager(t *testing.T) {
	root := filepath.Join("..", "..")
	docs := readManagerTable(t, filepath.Join(root, "docs", "ARCHITECTURE.md"))
	consts := managerConstants(t, filepath.Join(root, "api", "v1alpha1", "field_managers.go"))
	for name, value := range consts {
		if d, ok := docs[name]; !ok || d.value != value {
			t.Errorf("field manager %s (%q) is not in docs/ARCHITECTURE.md's table as %q", name, value, value)
		}
	}
	for name := range docs {
		if _, ok := consts[name]; !ok {
			t.Errorf("docs/ARCHITECTURE.md documents field manager %s, which api/v1alpha1 does not declare", name)
		}
	}
	fset := token.NewFileSet()
	writes := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "examples", "testdata", "bin":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel == "api/v1alpha1" || strings.HasPrefix(rel, "pkg/client") {
			return nil // the declarations; the generated REST client writes no custom resource
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		api := importName(f, apiPath)
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				if x, ok := n.X.(*ast.Ident); ok && api != "" && x.Name == api {
					if doc, ok := docs[n.Sel.Name]; ok && !slices.Contains(doc.packages, rel) {
						t.Errorf("%s: %s.%s used in %s; docs/ARCHITECTURE.md assigns it to %v", fset.Position(n.Pos()), api, n.Sel.Name, rel, doc.packages)
					}
				}
			case *ast.CallExpr:
				if isStatusWrite(n) {
					writes++
					checkOwner(t, fset, n, api, docs, rel)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if writes < 3 {
		t.Fatalf("found only %d status writes", writes)
	}
}

// isStatusWrite: call is X.Status().M(...) or X.SubResource("status").M(...) with M a write.
func isStatusWrite(call *ast.CallExpr) bool {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	switch sel.Sel.Name {
	case "Update", "Patch", "Apply", "Create":
	default:
		return false
	}
	inner, ok := sel.X.(*ast.CallExpr)
	if !ok {
		return false
	}
	isel, ok := inner.Fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	switch isel.Sel.Name {
	case "Status":
		return len(inner.Args) == 0
	case "SubResource":
		if len(inner.Args) != 1 {
			return false
		}
		lit, ok := inner.Args[0].(*ast.BasicLit)
		return ok && lit.Value == `"status"`
	}
	return false
}

// checkOwner: one of call's arguments is client.FieldOwner(<api>.<documented manager>), and rel
// is a package the table assigns that manager to.
func checkOwner(t *testing.T, fset *token.FileSet, call *ast.CallExpr, api string, docs map[string]documentedManager, rel string) {
	t.Helper()
	for _, arg := range call.Args {
		owner, ok := arg.(*ast.CallExpr)
		if !ok || len(owner.Args) != 1 {
			continue
		}
		if fn, ok := owner.Fun.(*ast.SelectorExpr); !ok || fn.Sel.Name != "FieldOwner" {
			continue
		}
		c, ok := owner.Args[0].(*ast.SelectorExpr)
		if x, isIdent := c.X.(*ast.Ident); !ok || !isIdent || api == "" || x.Name != api {
			t.Errorf("%s: the status write's field owner is not a constant of api/v1alpha1", fset.Position(call.Pos()))
			return
		}
		if _, ok := docs[c.Sel.Name]; !ok {
			t.Errorf("%s: field manager %s is not documented in docs/ARCHITECTURE.md", fset.Position(call.Pos()), c.Sel.Name)
		}
		return // the package is checked where the constant is used
	}
	t.Errorf("%s: a status write without client.FieldOwner(agentsv1.<manager>): every status field has one named writer", fset.Position(call.Pos()))
}

// managerRow is a row of the table: | `Constant` | `value` | `pkg`, `pkg` | what it writes |
var managerRow = regexp.MustCompile("^\\| `(\\w+FieldManager)` \\| `([^`]+)` \\| ([^|]+) \\|")

// readManagerTable reads the field manager table of docs/ARCHITECTURE.md.
func readManagerTable(t *testing.T, path string) map[string]documentedManager {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	docs := map[string]documentedManager{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		m := managerRow.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		var pkgs []string
		for _, p := range strings.Split(m[3], ",") {
			pkgs = append(pkgs, strings.Trim(strings.TrimSpace(p), "`"))
		}
		docs[m[1]] = documentedManager{value: m[2], packages: pkgs}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(docs) == 0 {
		t.Fatalf("%s has no field manager table", path)
	}
	return docs
}

// managerConstants reads the string constants named *FieldManager of path.
func managerConstants(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	consts := map[string]string{}
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if !strings.HasSuffix(name.Name, "FieldManager") || i >= len(vs.Values) {
					continue
				}
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					consts[name.Name], _ = strconv.Unquote(lit.Value)
				}
			}
		}
	}
	if len(consts) == 0 {
		t.Fatalf("%s declares no field manager", path)
	}
	return consts
}

// importName is the name f imports path under ("" when it does not).
func importName(f *ast.File, path string) string {
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == path {
			if imp.Name != nil {
				return imp.Name.Name
			}
			return filepath.Base(path)
		}
	}
	return ""
}
