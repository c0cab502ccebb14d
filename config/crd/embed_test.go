package crd_test

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/agentplane/agentplane/config/crd"
	agentscheme "github.com/agentplane/agentplane/internal/scheme"
)

// Every agentplane kind the clients know has exactly one embedded CRD, which serves and stores
// that kind's version; there are no others.
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
		if len(c.Spec.Versions) != 1 || c.Spec.Versions[0].Name != "v1alpha1" || !c.Spec.Versions[0].Served || !c.Spec.Versions[0].Storage {
			t.Errorf("%s: versions %+v, want v1alpha1 served and stored", c.Name, c.Spec.Versions)
		}
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
