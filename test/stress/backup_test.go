package stress

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// backupKinds are what a backup of the platform's objects holds, in the order a restore
// creates them (owners before what they own): the namespaces, agentplane's kinds and the core
// Secrets (the signing and sealing keys, the gateway tokens).
var backupKinds = []schema.GroupVersionKind{
	{Version: "v1", Kind: "Namespace"},
	agentsv1.GroupVersion.WithKind("Workspace"),
	agentsv1.GroupVersion.WithKind("AgentTemplate"),
	agentsv1.GroupVersion.WithKind("ApiKey"),
	agentsv1.GroupVersion.WithKind("AgentSecret"),
	agentsv1.GroupVersion.WithKind("Agent"),
	agentsv1.GroupVersion.WithKind("Skill"),
	agentsv1.GroupVersion.WithKind("Channel"),
	agentsv1.GroupVersion.WithKind("Domain"),
	agentsv1.GroupVersion.WithKind("File"),
	agentsv1.GroupVersion.WithKind("Snapshot"),
	{Version: "v1", Kind: "Secret"},
}

// backup is a list-and-serialise backup of a platform's objects, as `kubectl get -o json` (or
// Velero) takes one: each object's JSON, status included, in backupKinds' order.
type backup [][]byte

// takeBackup lists the objects of backupKinds in namespaces (cluster-scoped kinds: all of
// them) and serialises them.
func takeBackup(ctx context.Context, c client.Client, namespaces ...string) (backup, error) {
	var b backup
	keep := map[string]bool{}
	for _, ns := range namespaces {
		keep[ns] = true
	}
	for _, gvk := range backupKinds {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := c.List(ctx, list); err != nil {
			return nil, fmt.Errorf("list %s: %w", gvk.Kind, err)
		}
		for _, o := range list.Items {
			if ns := o.GetNamespace(); ns != "" && !keep[ns] || gvk.Kind == "Namespace" && !keep[o.GetName()] {
				continue
			}
			raw, err := json.Marshal(o.Object)
			if err != nil {
				return nil, err
			}
			b = append(b, raw)
		}
	}
	return b, nil
}

// restore creates b's objects on the control plane of c, as a restore into a rebuilt control
// plane does: without the old UIDs, resourceVersions and timestamps, with the owner references
// pointing at the owners' new UIDs, and the status written back through the status
// subresource (Velero's restore of status).
func (b backup) restore(ctx context.Context, c client.Client) error {
	uids := map[types.UID]types.UID{} // old -> new
	for _, raw := range b {
		u := &unstructured.Unstructured{}
		if err := json.Unmarshal(raw, &u.Object); err != nil {
			return err
		}
		old := u.GetUID()
		status, hasStatus := u.Object["status"]
		stripForRestore(u, uids)
		if err := c.Create(ctx, u); err != nil {
			return fmt.Errorf("restore %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
		}
		uids[old] = u.GetUID()
		if !hasStatus || u.GetAPIVersion() == "v1" {
			continue
		}
		u.Object["status"] = status
		if err := c.Status().Update(ctx, u); err != nil {
			return fmt.Errorf("restore the status of %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
		}
	}
	return nil
}

// stripForRestore drops what the API server assigns and re-points the owner references.
func stripForRestore(u *unstructured.Unstructured, uids map[types.UID]types.UID) {
	for _, f := range []string{"uid", "resourceVersion", "creationTimestamp", "managedFields", "generation", "deletionTimestamp", "deletionGracePeriodSeconds"} {
		unstructured.RemoveNestedField(u.Object, "metadata", f)
	}
	delete(u.Object, "status")
	if u.GetKind() == "Namespace" {
		unstructured.RemoveNestedField(u.Object, "spec") // finalizers the API server sets
	}
	refs := u.GetOwnerReferences()
	kept := refs[:0]
	for _, r := range refs {
		if n, ok := uids[r.UID]; ok {
			r.UID = n
			kept = append(kept, r)
		}
	}
	u.SetOwnerReferences(kept)
}
