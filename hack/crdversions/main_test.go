package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// The committed CRDs are what the step makes of controller-gen's v1alpha1-only output (here:
// the committed file with v1beta1 taken out, as controller-gen writes it), and a second run
// changes nothing.
func TestAddStorageVersion(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "..", "config", "crd", "bases", "*.yaml"))
	if len(files) == 0 {
		t.Fatal("no CRDs")
	}
	from, to := agentsv1.GroupVersion.Version, agentsv1.StorageGroupVersion.Version
	for _, f := range files {
		committed, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		again, err := addStorageVersion(committed, from, to)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again, committed) {
			t.Errorf("%s: a second run changes the file", f)
		}
		generated := controllerGenOutput(t, committed, from)
		got, err := addStorageVersion(generated, from, to)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, committed) {
			t.Errorf("%s: the step makes another file of controller-gen's output", f)
		}
	}
	if _, err := addStorageVersion([]byte("---\nspec:\n  versions:\n  - name: v1\n"), from, to); err == nil {
		t.Error("a CRD without v1alpha1: no error")
	}
}

// controllerGenOutput is crd as controller-gen writes it: version from alone, stored, no
// conversion.
func controllerGenOutput(t *testing.T, crd []byte, from string) []byte {
	t.Helper()
	obj, err := decode(crd)
	if err != nil {
		t.Fatal(err)
	}
	spec := obj["spec"].(map[string]any)
	delete(spec, "conversion")
	var kept []any
	for _, v := range spec["versions"].([]any) {
		if m := v.(map[string]any); m["name"] == from {
			m["storage"] = true
			kept = append(kept, m)
		}
	}
	spec["versions"] = kept
	out, err := yaml.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte("---\n"), out...)
}
