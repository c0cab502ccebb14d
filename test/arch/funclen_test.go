package arch

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxFuncLines is the developers' guide's bound on a function: its declaration, from `func`
// to the closing brace, doc comment not counted.
const maxFuncLines = 80

// longFuncs are the functions allowed over maxFuncLines, by path (from the module's root,
// slash-separated) and name ("Type.Method" for a method): declarative tables only (a route
// table, an OpenAPI op table, a list of flag declarations), each with why it stays whole.
// Logic is split into phases instead. An entry whose function is no longer long fails too,
// so the list never outlives its reason.
var longFuncs = map[string]string{
	// None today: every table over the bound had a natural seam (the facade's routes and
	// agentOps by section, the manager's flags apart from their completion, buildStatefulSet
	// by container).
}

// TestFunctionsAreShort: no function of the module (test files, generated code and other
// modules aside) is over maxFuncLines, unless longFuncs lets it be.
func TestFunctionsAreShort(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	files := 0
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "testdata", "bin":
				return filepath.SkipDir
			}
			// Another module (hack/tools/*, examples/*) is not this one's code.
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && path != root {
				return filepath.SkipDir
			}
			return nil
		}
		name := d.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") ||
			strings.HasPrefix(name, "zz_generated") || strings.HasSuffix(name, ".gen.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if ast.IsGenerated(f) {
			return nil
		}
		files++
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			lines := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
			if lines <= maxFuncLines {
				continue
			}
			key := filepath.ToSlash(rel) + " " + funcName(fd)
			if _, ok := longFuncs[key]; ok {
				seen[key] = true
				continue
			}
			t.Errorf("%s: %s is %d lines, over %d: split it into well-named steps (a declarative table may go in longFuncs, with why)",
				fset.Position(fd.Pos()), funcName(fd), lines, maxFuncLines)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("read only %d Go files", files)
	}
	for key := range longFuncs {
		if !seen[key] {
			t.Errorf("longFuncs: %s is not over %d lines (or is gone): drop it from the list", key, maxFuncLines)
		}
	}
}

// funcName is fd's name, "Type.Method" for a method.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	typ := fd.Recv.List[0].Type
	for {
		switch x := typ.(type) {
		case *ast.StarExpr:
			typ = x.X
			continue
		case *ast.IndexExpr:
			typ = x.X
			continue
		case *ast.IndexListExpr:
			typ = x.X
			continue
		}
		break
	}
	return exprName(typ) + "." + fd.Name.Name
}
