package storageversion_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/controllers/storageversion"
	"github.com/agentplane/agentplane/internal/platform"
)

// stored is an object the scenario created, with its CRD's resource and kind.
type stored struct {
	obj            client.Object
	resource, kind string
}

// createAlphaObjects creates, through v1alpha1 before v1beta1 exists, a Workspace, Agents
// (more than a page), an AgentSecret and a Snapshot with a status.
func (c *cluster) createAlphaObjects(t *testing.T, ctx context.Context, ns string) []stored {
	t.Helper()
	ws := &agentsv1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: ns}, Spec: agentsv1.WorkspaceSpec{DisplayName: "Migration", Plan: agentsv1.PlanPro}}
	out := []stored{{ws, "workspaces", "Workspace"}}
	for i := range 5 {
		a := &agentsv1.Agent{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("agent-%d", i), Namespace: ns, Labels: map[string]string{"n": fmt.Sprint(i)}},
			Spec:       agentsv1.AgentSpec{DisplayName: fmt.Sprintf("Agent %d", i), AgentProfile: agentsv1.AgentProfile{Vibe: "calm"}},
		}
		out = append(out, stored{a, "agents", "Agent"})
	}
	sec := &agentsv1.AgentSecret{
		ObjectMeta: metav1.ObjectMeta{Name: "openai", Namespace: ns},
		Spec:       agentsv1.AgentSecretSpec{Name: "OPENAI_API_KEY", Provider: "openai", SecretRef: &agentsv1.SecretKeyReference{Name: "keys", Key: "openai"}},
	}
	snap := &agentsv1.Snapshot{
		ObjectMeta: metav1.ObjectMeta{Name: "snap", Namespace: ns},
		Spec:       agentsv1.SnapshotSpec{AgentRef: agentsv1.LocalObjectReference{Name: "agent-0"}},
	}
	out = append(out, stored{sec, "agentsecrets", "AgentSecret"}, stored{snap, "snapshots", "Snapshot"})
	if err := c.admin.Create(ctx, namespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, s := range out {
		if err := c.admin.Create(ctx, s.obj); err != nil {
			t.Fatalf("create %s %s: %v", s.kind, s.obj.GetName(), err)
		}
	}
	snap.Status = agentsv1.SnapshotStatus{Phase: agentsv1.SnapshotCompleted, CID: "bafkreih5aznjvttude6c3wbvqeebb6rlx5wkbzyppv7garjiubll2ceym4", Size: 42}
	if err := c.admin.Status().Update(ctx, snap, client.FieldOwner(agentsv1.ControllerFieldManager)); err != nil {
		t.Fatal(err)
	}
	return out
}

// Objects written before v1beta1 stay stored as v1alpha1 after the CRDs change; the migration
// rewrites each (with the manager's RBAC, in pages, through a deletion and a concurrent update
// of objects it listed), then leaves only v1beta1 in every CRD's storedVersions. Every object
// reads the same through both versions, one created through v1beta1 reads through v1alpha1,
// and a second migration writes nothing.
func TestMigrationMovesEveryObjectToV1beta1(t *testing.T) {
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const ns = "migration"
	objs := c.createAlphaObjects(t, ctx, ns)
	for _, s := range objs {
		if got := c.storedAPIVersion(t, s.resource, s.obj); got != alpha.String() {
			t.Fatalf("%s %s stored as %s before v1beta1 exists", s.kind, s.obj.GetName(), got)
		}
	}

	c.applyCurrentCRDs(t, ctx)
	for _, s := range objs { // a CRD change rewrites nothing
		if got := c.storedAPIVersion(t, s.resource, s.obj); got != alpha.String() {
			t.Fatalf("%s %s stored as %s before the migration", s.kind, s.obj.GetName(), got)
		}
	}
	if got := c.storedVersions(t, ctx, "agents.agentplane.io"); !slices.Equal(got, []string{alpha.Version, beta.Version}) {
		t.Fatalf("agents' storedVersions %v after the CRD change", got)
	}
	born := c.createThroughBeta(t, ctx, ns)

	cl, cfg := c.migratorClient(t, ctx)
	doomed, busy := objs[2].obj, objs[3].obj
	m := &storageversion.Migrator{
		Client: hooked{Client: cl, before: func(obj client.Object) {
			switch obj.GetName() {
			case doomed.GetName(): // deleted after the list, before its rewrite
				_ = c.admin.Delete(ctx, doomed)
			case busy.GetName(): // changed after the list: the rewrite conflicts, then retries
				if obj.GetAnnotations()["concurrent"] == "" {
					patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"annotations":{"concurrent":"write"}}}`))
					if err := c.admin.Patch(ctx, busy, patch); err != nil {
						t.Errorf("concurrent write: %v", err)
					}
				}
			}
		}},
		Reader: cl, Discovery: discovery.NewDiscoveryClientForConfigOrDie(cfg),
		CRDs: crdNames(), PageSize: 2, Log: testr.New(t),
	}
	if err := m.MigrateAll(ctx); err != nil {
		t.Fatalf("migration: %v", err)
	}

	for _, name := range crdNames() {
		if got := c.storedVersions(t, ctx, name); !slices.Equal(got, []string{beta.Version}) {
			t.Errorf("%s: storedVersions %v after the migration, want [%s]", name, got, beta.Version)
		}
	}
	if err := c.admin.Get(ctx, client.ObjectKeyFromObject(doomed), doomed.DeepCopyObject().(client.Object)); !apierrors.IsNotFound(err) {
		t.Errorf("the deleted agent: %v", err)
	}
	if err := c.admin.Get(ctx, client.ObjectKeyFromObject(busy), busy); err != nil || busy.GetAnnotations()["concurrent"] != "write" {
		t.Errorf("the concurrent write is lost: %v %v", err, busy.GetAnnotations())
	}
	for _, s := range append(objs, born) {
		if s.obj == doomed {
			continue
		}
		if got := c.storedAPIVersion(t, s.resource, s.obj); got != beta.String() {
			t.Errorf("%s %s stored as %s after the migration", s.kind, s.obj.GetName(), got)
		}
		c.sameInBothVersions(t, ctx, s.obj, s.kind)
		c.ownsNoField(t, ctx, s.obj, s.kind)
	}
	c.checkStatusKept(t, ctx, objs[len(objs)-1].obj)
	// kubectl get: the same printer columns through either version.
	cols := c.tableColumns(t, ctx, beta, ns)
	if !slices.Contains(cols, "Display Name") || !slices.Equal(cols, c.tableColumns(t, ctx, alpha, ns)) {
		t.Errorf("kubectl get agents: columns %v via v1beta1, %v via v1alpha1", cols, c.tableColumns(t, ctx, alpha, ns))
	}

	var all []client.Object
	for _, s := range objs {
		all = append(all, s.obj)
	}
	before := resourceVersions(t, ctx, c.admin, all)
	// The second pass is the manager's: the runnable internal/platform adds, over every CRD
	// of config/crd; Start returns once a pass succeeds.
	again, err := platform.NewStorageMigrator(cfg, cl, cl)
	if err != nil {
		t.Fatal(err)
	}
	again.Log = testr.New(t)
	if err := again.Start(ctx); err != nil || ctx.Err() != nil {
		t.Fatalf("second migration: %v %v", err, ctx.Err())
	}
	unchanged(t, before, resourceVersions(t, ctx, c.admin, all))
}

// createThroughBeta creates an Agent through v1beta1 and checks it reads through v1alpha1 (the
// Go types') with its spec.
func (c *cluster) createThroughBeta(t *testing.T, ctx context.Context, ns string) stored {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "born-beta", "namespace": ns},
		"spec":     map[string]any{"displayName": "Born in beta", "description": "created through v1beta1"},
	}}
	u.SetGroupVersionKind(beta.WithKind("Agent"))
	if err := c.admin.Create(ctx, u); err != nil {
		t.Fatalf("create through v1beta1: %v", err)
	}
	a := &agentsv1.Agent{}
	if err := c.admin.Get(ctx, client.ObjectKeyFromObject(u), a); err != nil {
		t.Fatalf("read through v1alpha1: %v", err)
	}
	if a.Spec.DisplayName != "Born in beta" || a.Spec.Description != "created through v1beta1" {
		t.Fatalf("read through v1alpha1: spec %+v", a.Spec)
	}
	if got := c.storedAPIVersion(t, "agents", a); got != beta.String() {
		t.Fatalf("created through v1beta1, stored as %s", got)
	}
	return stored{a, "agents", "Agent"}
}

// checkStatusKept: the snapshot's status, written before the migration, reads back the same
// through the Go types.
func (c *cluster) checkStatusKept(t *testing.T, ctx context.Context, obj client.Object) {
	t.Helper()
	snap := &agentsv1.Snapshot{}
	if err := c.admin.Get(ctx, client.ObjectKeyFromObject(obj), snap); err != nil {
		t.Fatal(err)
	}
	if snap.Status.CID == "" || snap.Status.Size != 42 || snap.Status.Phase != agentsv1.SnapshotCompleted {
		t.Errorf("snapshot status after the migration: %+v", snap.Status)
	}
}

// ownsNoField: the migration's writes left no field manager entry on obj (they changed no
// field), so the status writers' table stays true.
func (c *cluster) ownsNoField(t *testing.T, ctx context.Context, obj client.Object, kind string) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(beta.WithKind(kind))
	if err := c.admin.Get(ctx, client.ObjectKeyFromObject(obj), u); err != nil {
		t.Fatal(err)
	}
	for _, mf := range u.GetManagedFields() {
		if mf.Manager == agentsv1.StorageMigrationFieldManager {
			t.Errorf("%s %s: the migration owns fields %s", kind, obj.GetName(), mf.FieldsV1)
		}
	}
}
