// Command crdversions gives every CRD that controller-gen wrote into config/crd/bases its
// v1beta1 version: `make manifests` runs it right after controller-gen. The v1beta1 entry is
// a copy of the v1alpha1 entry that controller-gen generated from api/v1alpha1 (schema,
// printer columns, subresources, selectable fields), so the two versions have one source and
// cannot drift; v1beta1 is the storage version, v1alpha1 stays served, and the conversion
// strategy is None (the API server rewrites only apiVersion). A real schema change needs a
// version with types of its own and a conversion webhook instead (README "API versions").
//
//	go run ./hack/crdversions [config/crd/bases]
//
// The files keep controller-gen's format (its YAML writer: the document's JSON, keys sorted,
// through sigs.k8s.io/yaml), so a second run changes nothing and `make verify-generated`
// catches a CRD without v1beta1.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

func main() {
	flag.Parse()
	dir := filepath.Join("config", "crd", "bases")
	if flag.NArg() > 0 {
		dir = flag.Arg(0)
	}
	if err := run(dir); err != nil {
		fmt.Fprintln(os.Stderr, "crdversions:", err)
		os.Exit(1)
	}
}

// run rewrites every CRD file of dir.
func run(dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no CRDs in %s", dir)
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		out, err := addStorageVersion(raw, agentsv1.GroupVersion.Version, agentsv1.StorageGroupVersion.Version)
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if !bytes.Equal(out, raw) {
			if err := os.WriteFile(f, out, 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// addStorageVersion returns the CRD document raw (as controller-gen writes it) with version to
// a copy of version from, to the storage version and from served but no longer stored, and
// the conversion strategy None. A version to already in raw is replaced by a fresh copy.
func addStorageVersion(raw []byte, from, to string) ([]byte, error) {
	crd, err := decode(raw)
	if err != nil {
		return nil, err
	}
	spec, _ := crd["spec"].(map[string]any)
	versions, _ := spec["versions"].([]any)
	var src map[string]any
	kept := []any{}
	for _, v := range versions {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("spec.versions holds a %T", v)
		}
		switch m["name"] {
		case to:
			continue
		case from:
			src = m
		}
		kept = append(kept, m)
	}
	if src == nil {
		return nil, fmt.Errorf("no version %s in spec.versions", from)
	}
	dst, _ := runtime.DeepCopyJSONValue(src).(map[string]any)
	src["storage"] = false
	dst["name"], dst["storage"] = to, true
	kept = append(kept, dst)
	sort.Slice(kept, func(i, j int) bool {
		return kept[i].(map[string]any)["name"].(string) < kept[j].(map[string]any)["name"].(string)
	})
	spec["versions"] = kept
	spec["conversion"] = map[string]any{"strategy": "None"}
	out, err := yaml.Marshal(crd)
	if err != nil {
		return nil, err
	}
	return append([]byte("---\n"), out...), nil
}

// decode reads a CRD document into the JSON values controller-gen marshals (numbers kept exact).
func decode(raw []byte) (map[string]any, error) {
	j, err := yaml.YAMLToJSON(bytes.TrimPrefix(raw, []byte("---\n")))
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	var crd map[string]any
	if err := dec.Decode(&crd); err != nil {
		return nil, err
	}
	if _, ok := crd["spec"].(map[string]any); !ok {
		return nil, fmt.Errorf("no spec")
	}
	return crd, nil
}
