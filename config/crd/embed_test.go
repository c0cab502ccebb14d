package crd_test

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/config/crd"
	agentscheme "github.com/agentplane/agentplane/internal/scheme"
)

// Every agentplane kind the clients know has exactly one embedded CRD, which serves v1alpha1
// and v1beta1 and stores v1beta1; there are no others.
func TestCRDsCoverEveryKind(t *testing.T) {
	crds := crd.MustCRDs()
	byKind := map[string]string{}
	for _, c := range crds {
		if c.Spec.Group != "agentplane.io" {
			t.Errorf("%s: group %q", c.Name, c.Spec.Group)
		}
		if prev, dup := byKind[c.Spec.Names.Kind]; dup {
			t.Errorf("kind %s in %s and %s", c.Spec.Names.Kind, prev, c.Name)
		}
		byKind[c.Spec.Names.Kind] = c.Name
		checkVersions(t, c)
	}
	var want []string
	s := agentscheme.New()
	for gvk := range s.AllKnownTypes() {
		if gvk.Group != "agentplane.io" {
			continue
		}
		obj, err := s.New(gvk)
		if err != nil {
			t.Fatal(err)
		}
		if _, isObject := obj.(metav1.Object); isObject { // not a list, options or event
			want = append(want, gvk.Kind)
		}
	}
	sort.Strings(want)
	var got []string
	for k := range byKind {
		got = append(got, k)
	}
	sort.Strings(got)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("CRD kinds %v, scheme kinds %v", got, want)
	}
	for i := 1; i < len(crds); i++ {
		if crds[i-1].Name >= crds[i].Name {
			t.Errorf("not sorted by name: %s before %s", crds[i-1].Name, crds[i].Name)
		}
	}
}

// PROJECT (kubebuilder's index of the API) lists every kind with the CRD's scope.
func TestProjectListsEveryKind(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "PROJECT"))
	if err != nil {
		t.Fatal(err)
	}
	var project struct {
		Resources []struct {
			Kind, Group, Version string
			API                  struct{ Namespaced bool } `json:"api"`
		} `json:"resources"`
	}
	if err := yaml.Unmarshal(raw, &project); err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, r := range project.Resources {
		listed[r.Kind] = r.API.Namespaced
	}
	for _, c := range crd.MustCRDs() {
		namespaced, ok := listed[c.Spec.Names.Kind]
		switch {
		case !ok:
			t.Errorf("PROJECT does not list %s", c.Spec.Names.Kind)
		case namespaced != (c.Spec.Scope == "Namespaced"):
			t.Errorf("PROJECT: %s namespaced %v, the CRD's scope is %s", c.Spec.Names.Kind, namespaced, c.Spec.Scope)
		}
		delete(listed, c.Spec.Names.Kind)
	}
	for kind := range listed {
		t.Errorf("PROJECT lists %s, which has no CRD", kind)
	}
}

// checkVersions: c serves v1alpha1 (the Go types' version) and v1beta1, stores v1beta1, and
// the two versions are the same but for their names: schema, printer columns (kubectl get
// shows the same table through either), subresources, selectable fields. So conversion None
// (the API server rewrites only apiVersion) loses nothing, and the versions cannot drift:
// hack/crdversions derives v1beta1 from v1alpha1 at each `make manifests`.
func checkVersions(t *testing.T, c *apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	vs := c.Spec.Versions
	if len(vs) != 2 || vs[0].Name != agentsv1.GroupVersion.Version || vs[1].Name != agentsv1.StorageGroupVersion.Version {
		t.Errorf("%s: versions %v, want v1alpha1 and v1beta1", c.Name, names(vs))
		return
	}
	alpha, beta := vs[0], vs[1]
	if !alpha.Served || alpha.Storage || !beta.Served || !beta.Storage || alpha.Deprecated || beta.Deprecated {
		t.Errorf("%s: want both versions served, v1beta1 stored, neither deprecated; v1alpha1 %+v, v1beta1 %+v",
			c.Name, alpha, beta)
	}
	if c.Spec.Conversion == nil || c.Spec.Conversion.Strategy != apiextensionsv1.NoneConverter {
		t.Errorf("%s: conversion %+v, want strategy None", c.Name, c.Spec.Conversion)
	}
	if len(alpha.AdditionalPrinterColumns) == 0 {
		t.Errorf("%s: no printer columns", c.Name)
	}
	alpha.Name, alpha.Storage = beta.Name, beta.Storage
	if !equality.Semantic.DeepEqual(alpha, beta) {
		t.Errorf("%s: v1alpha1 and v1beta1 differ beyond their names", c.Name)
	}
}

func names(vs []apiextensionsv1.CustomResourceDefinitionVersion) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.Name)
	}
	return out
}
