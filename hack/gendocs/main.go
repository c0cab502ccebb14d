// Command gendocs writes the REST facade's documentation from its route table and route
// descriptions: the OpenAPI document (facade/openapi/openapi.json, embedded and served at
// GET /openapi.json, and its copy docs/openapi.json) and the route table of README.md
// (between the routes:begin and routes:end markers). Run it from the repository root
// (`make docs`); `make verify-generated` fails when its output differs from the tree.
package main

import (
	"bytes"
	"fmt"
	"os"

	"github.com/go-logr/logr"

	"github.com/agentplane/agentplane/facade"
	"github.com/agentplane/agentplane/facade/openapi"
)

// Where gendocs writes, relative to the repository root.
const (
	embeddedDocument = "facade/openapi/openapi.json"
	docsDocument     = "docs/openapi.json"
	readme           = "README.md"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "gendocs:", err)
		os.Exit(1)
	}
}

func run() error {
	routes := facade.New(facade.Options{Log: logr.Discard()}).Routes()
	doc, err := facade.OpenAPIDocument(routes)
	if err != nil {
		return err
	}
	table, err := facade.RoutesMarkdown(routes)
	if err != nil {
		return err
	}
	current, err := os.ReadFile(readme)
	if err != nil {
		return err
	}
	updated, err := openapi.SpliceREADME(current, table)
	if err != nil {
		return err
	}
	for path, content := range map[string][]byte{embeddedDocument: doc, docsDocument: doc, readme: updated} {
		if err := writeIfChanged(path, content); err != nil {
			return err
		}
	}
	return nil
}

// writeIfChanged writes content to path unless it holds it already.
func writeIfChanged(path string, content []byte) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, content) {
		return nil
	}
	return os.WriteFile(path, content, 0o644)
}
