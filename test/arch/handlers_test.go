package arch

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestHandlersCallOperations: the facade's handlers decode a request, call one operation of
// internal/ops and encode its result. Reading and writing the API server, and retrying its
// conflicts, is the operations' work, so the CLI and other doors get the same behaviour. No
// file is exempt: authentication reads through an operation too (ops.AuthLookup).
func TestHandlersCallOperations(t *testing.T) {
	dir := filepath.Join("..", "..", "facade")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	read := 0
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		read++
		if calls := clientCalls(fset, f); len(calls) > 0 {
			t.Errorf("%s reads or writes the API server in a handler (%s): move it into an operation of internal/ops",
				name, strings.Join(calls, ", "))
		}
	}
	if read < 20 {
		t.Fatalf("read only %d of the facade's files", read)
	}
}

// operationDeps are the dependencies only operations use: the API server's clients, the
// runtime and the engine.
var operationDeps = []string{"Client", "APIReader", "Informers", "Runtime", "Engine", "Admission", "Sealer", "Files"}

// clientCalls lists the uses of the operations' dependencies (opts.Client, opts.Runtime, ...)
// and of client-go's conflict retries in f, by position.
func clientCalls(fset *token.FileSet, f *ast.File) []string {
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		what := ""
		switch x := sel.X.(type) {
		case *ast.SelectorExpr:
			if x.Sel.Name == "opts" && slices.Contains(operationDeps, sel.Sel.Name) {
				what = "opts." + sel.Sel.Name
			}
		case *ast.Ident:
			if x.Name == "retry" {
				what = "retry." + sel.Sel.Name
			}
		}
		if what != "" {
			out = append(out, what+" at line "+strconv.Itoa(fset.Position(sel.Pos()).Line))
		}
		return true
	})
	return out
}
