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

// TestStatusWritersNameTheirManager: the field managers api/v1alpha1 declares are the ones
// docs/ARCHITECTURE.md's table documents, and every use of a manager constant is in a package
// the table assigns to it. With TestStatusWritesByType (every status write names one of them,
// from its packages), each status field has the one writer the table names.
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
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
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
