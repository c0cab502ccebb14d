// Package crd holds agentplane's CustomResourceDefinitions as Go values: the YAML that
// `make manifests` generates into bases/ is embedded in the binary (no checkout or file path
// needed, and `make verify-generated` fails when bases/ is stale against the API types). A test
// installs them with one line:
//
//	env := &envtest.Environment{CRDs: crd.MustCRDs()}
package crd

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

//go:embed bases/*.yaml
var bases embed.FS

// CRDs returns every CustomResourceDefinition of agentplane, sorted by name.
func CRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	names, err := fs.Glob(bases, "bases/*.yaml")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	out := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(names))
	for _, n := range names {
		raw, err := bases.ReadFile(n)
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(raw, crd); err != nil {
			return nil, fmt.Errorf("%s: %w", n, err)
		}
		out = append(out, crd)
	}
	return out, nil
}

// MustCRDs is CRDs for set-up code; it panics when the embedded YAML does not decode, which
// only a broken build of this module can cause.
func MustCRDs() []*apiextensionsv1.CustomResourceDefinition {
	crds, err := CRDs()
	if err != nil {
		panic(fmt.Sprintf("agentplane CRDs: %v", err))
	}
	return crds
}
