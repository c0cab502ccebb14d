package storageversion_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/config/crd"
	"github.com/agentplane/agentplane/controllers/storageversion"
	"github.com/agentplane/agentplane/internal/devtools/testenv"
	"github.com/agentplane/agentplane/internal/devtools/testenv/kubeenv"
	"github.com/agentplane/agentplane/internal/scheme"
	"github.com/agentplane/agentplane/pkg/agentplanetest/controlplane"
)

var (
	alpha = agentsv1.GroupVersion
	beta  = agentsv1.StorageGroupVersion
)

// cluster is a control plane that started with agentplane's CRDs as they were before
// v1beta1: v1alpha1 alone, served and stored.
type cluster struct {
	env   *envtest.Environment
	cfg   *rest.Config
	admin client.Client
	// etcd is the control plane's etcd client URL: its JSON gateway (/v3/kv/range) reads
	// what the API server stored.
	etcd string
}

// alphaOnly is crds as they were before v1beta1: each with its v1alpha1 version alone, stored.
func alphaOnly(crds []*apiextensionsv1.CustomResourceDefinition) []*apiextensionsv1.CustomResourceDefinition {
	for _, c := range crds {
		var kept []apiextensionsv1.CustomResourceDefinitionVersion
		for _, v := range c.Spec.Versions {
			if v.Name == alpha.Version {
				v.Storage = true
				kept = append(kept, v)
			}
		}
		c.Spec.Versions, c.Spec.Conversion = kept, nil
	}
	return crds
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	assets := kubeenv.AssetsDir()
	if _, err := os.Stat(filepath.Join(assets, "kube-apiserver")); err != nil {
		testenv.Skip(t, "no kube-apiserver in %s: run `make envtest-assets`", assets)
	}
	env := controlplane.NewEnvironment()
	env.BinaryAssetsDirectory = assets
	env.CRDs = alphaOnly(crd.MustCRDs())
	env.Scheme = scheme.New()
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	admin, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return &cluster{env: env, cfg: cfg, admin: admin, etcd: env.ControlPlane.Etcd.URL.String()}
}

// storedAPIVersion is the apiVersion of obj as etcd holds it: the version the API server
// stored it in.
func (c *cluster) storedAPIVersion(t *testing.T, resource string, obj client.Object) string {
	t.Helper()
	key := "/registry/" + agentsv1.GroupVersion.Group + "/" + resource + "/"
	if obj.GetNamespace() != "" {
		key += obj.GetNamespace() + "/"
	}
	key += obj.GetName()
	body, _ := json.Marshal(map[string]string{"key": base64.StdEncoding.EncodeToString([]byte(key))})
	resp, err := http.Post(c.etcd+"/v3/kv/range", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var kv struct {
		Kvs []struct {
			Value []byte `json:"value"` // base64 in JSON
		} `json:"kvs"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&kv); err != nil {
		t.Fatalf("etcd %s: %v", key, err)
	}
	if len(kv.Kvs) != 1 {
		t.Fatalf("etcd has no key %s", key)
	}
	var stored struct {
		APIVersion string `json:"apiVersion"`
	}
	if err := json.Unmarshal(kv.Kvs[0].Value, &stored); err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return stored.APIVersion
}

// applyCurrentCRDs updates the CRDs to the ones this tree generates (v1beta1 served and
// stored) and waits until the API server serves v1beta1.
func (c *cluster) applyCurrentCRDs(t *testing.T, ctx context.Context) {
	t.Helper()
	for _, want := range crd.MustCRDs() {
		got := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.admin.Get(ctx, client.ObjectKey{Name: want.Name}, got); err != nil {
			t.Fatal(err)
		}
		got.Spec = want.Spec
		if err := c.admin.Update(ctx, got); err != nil {
			t.Fatalf("update %s: %v", want.Name, err)
		}
	}
	dc := discovery.NewDiscoveryClientForConfigOrDie(c.cfg)
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		list, err := dc.ServerResourcesForGroupVersion(beta.String())
		return err == nil && len(list.APIResources) >= 2*len(crd.MustCRDs()), nil // each kind and its status
	})
	if err != nil {
		t.Fatalf("v1beta1 not served: %v", err)
	}
}

// migratorClient is the manager's ClusterRole (config/rbac/role.yaml) bound to a user of its
// own: the migration runs with the permissions the chart gives it.
func (c *cluster) migratorClient(t *testing.T, ctx context.Context) (client.Client, *rest.Config) {
	t.Helper()
	role := managerRole(t)
	const user = "storage-migration-test"
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := c.admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	cfg := rest.CopyConfig(c.cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	cl, err := client.New(cfg, client.Options{Scheme: c.env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return cl, cfg
}

// sameInBothVersions: obj reads through v1alpha1 and v1beta1 with the same content but for
// apiVersion.
func (c *cluster) sameInBothVersions(t *testing.T, ctx context.Context, obj client.Object, kind string) {
	t.Helper()
	read := func(gv schema.GroupVersion) map[string]any {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gv.WithKind(kind))
		if err := c.admin.Get(ctx, client.ObjectKeyFromObject(obj), u); err != nil {
			t.Fatalf("%s %s via %s: %v", kind, obj.GetName(), gv, err)
		}
		if got := u.GetAPIVersion(); got != gv.String() {
			t.Fatalf("%s %s read via %s says apiVersion %s", kind, obj.GetName(), gv, got)
		}
		unstructured.RemoveNestedField(u.Object, "apiVersion")
		unstructured.RemoveNestedField(u.Object, "metadata", "managedFields")
		return u.Object
	}
	a, b := read(alpha), read(beta)
	if !reflect.DeepEqual(a, b) {
		t.Errorf("%s %s differs between the versions:\nv1alpha1 %v\nv1beta1  %v", kind, obj.GetName(), a, b)
	}
	if _, ok := b["spec"]; !ok && kind != "ApiKey" {
		t.Errorf("%s %s: no spec read", kind, obj.GetName())
	}
}

// hooked runs before(obj) before each of the migration's updates: a stand-in for other writers
// (a deletion, a concurrent update) between the migration's list and its write.
type hooked struct {
	client.Client
	before func(obj client.Object)
}

func (h hooked) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	h.before(obj)
	return h.Client.Update(ctx, obj, opts...)
}

// storedVersions is the CRD name's status.storedVersions.
func (c *cluster) storedVersions(t *testing.T, ctx context.Context, name string) []string {
	t.Helper()
	got := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.admin.Get(ctx, client.ObjectKey{Name: name}, got); err != nil {
		t.Fatal(err)
	}
	return got.Status.StoredVersions
}

// crdNames are the names of every agentplane CRD.
func crdNames() []string {
	var names []string
	for _, d := range crd.MustCRDs() {
		names = append(names, d.Name)
	}
	return names
}

// The storage version hash is the API server's own (discovery.StorageVersionHash in
// k8s.io/apiserver): the value it gives apps/v1 Deployments on every cluster.
func TestStorageVersionHash(t *testing.T) {
	if got := storageversion.StorageVersionHash("apps", "v1", "Deployment"); got != "8aSe+NMegvE=" {
		t.Fatalf("StorageVersionHash(apps, v1, Deployment) = %q", got)
	}
}

// unchanged fails when a migration pass of an already migrated cluster wrote anything.
func unchanged(t *testing.T, before, after map[string]string) {
	t.Helper()
	if !reflect.DeepEqual(before, after) {
		t.Errorf("a second migration wrote objects: resourceVersions %v, then %v", before, after)
	}
}

func resourceVersions(t *testing.T, ctx context.Context, c client.Client, objs []client.Object) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, o := range objs {
		cp := o.DeepCopyObject().(client.Object)
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), cp); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			t.Fatal(err)
		}
		out[o.GetName()] = cp.GetResourceVersion()
	}
	return out
}

func namespace(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// tableColumns are the columns of `kubectl get agents -n ns` through version gv: the API
// server's Table of the agents, which it builds from that version's printer columns.
func (c *cluster) tableColumns(t *testing.T, ctx context.Context, gv schema.GroupVersion, ns string) []string {
	t.Helper()
	hc, err := rest.HTTPClientFor(c.cfg)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(c.cfg.Host, "/")+"/apis/"+gv.String()+"/namespaces/"+ns+"/agents", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var table metav1.Table
	if err := json.NewDecoder(resp.Body).Decode(&table); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("table of agents via %s (%s): %d %v", gv, req.URL, resp.StatusCode, err)
	}
	var names []string
	for _, col := range table.ColumnDefinitions {
		names = append(names, col.Name)
	}
	if len(table.Rows) == 0 {
		t.Errorf("table of agents via %s: no rows", gv)
	}
	return names
}

// The manager's ClusterRole (config/rbac/role.yaml, generated from the RBAC markers) lets the
// migration list and update every kind of config/crd, and read the CRDs and write their status.
func TestManagerRoleMigratesEveryKind(t *testing.T) {
	role := managerRole(t)
	allows := func(group, resource, verb string) bool {
		for _, r := range role.Rules {
			if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) {
				return true
			}
		}
		return false
	}
	for _, d := range crd.MustCRDs() {
		for _, verb := range []string{"list", "update"} {
			if !allows(d.Spec.Group, d.Spec.Names.Plural, verb) {
				t.Errorf("the manager's role cannot %s %s: add it to controllers/storageversion's RBAC marker", verb, d.Spec.Names.Plural)
			}
		}
	}
	if !allows("apiextensions.k8s.io", "customresourcedefinitions", "get") || !allows("apiextensions.k8s.io", "customresourcedefinitions/status", "update") {
		t.Error("the manager's role cannot read CRDs or update their status")
	}
}

// managerRole is the manager's ClusterRole, config/rbac/role.yaml (the chart's is the same).
func managerRole(t *testing.T) *rbacv1.ClusterRole {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.Unmarshal(raw, role); err != nil {
		t.Fatal(err)
	}
	return role
}
