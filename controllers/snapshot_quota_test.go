package controllers_test

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	. "github.com/onsi/gomega"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/storage"
)

// setSnapshotQuota sets workspace ns's snapshot quota.
func setSnapshotQuota(ns string, maxBytes, maxObjects int64) {
	ws := &agentsv1.Workspace{}
	ExpectWithOffset(1, k8sClient.Get(ctx, client.ObjectKey{Name: ns}, ws)).To(Succeed())
	patch := client.MergeFrom(ws.DeepCopy())
	ws.Spec.Quotas = &agentsv1.StorageQuotas{Snapshots: &agentsv1.StorageQuota{
		MaxBytes: resource.NewQuantity(maxBytes, resource.BinarySI), MaxObjects: ptr.To(maxObjects),
	}}
	ExpectWithOffset(1, k8sClient.Patch(ctx, ws, patch)).To(Succeed())
}

// snapshotUsage is workspace ns's snapshot count: settled bytes and objects, and pending
// reservations.
func snapshotUsage(ns string) [3]int64 {
	ws := &agentsv1.Workspace{}
	ExpectWithOffset(1, k8sClient.Get(ctx, client.ObjectKey{Name: ns}, ws)).To(Succeed())
	c := ws.Status.Storage.Snapshots
	return [3]int64{c.Bytes, c.Objects, int64(len(c.Pending))}
}

// readyOf is the Snapshot's Ready condition's reason and message.
func readyOf(s *agentsv1.Snapshot) (reason, message string) {
	if c := meta.FindStatusCondition(getSnapshot(s).Status.Conditions, agentsv1.ConditionReady); c != nil {
		return c.Reason, c.Message
	}
	return "", ""
}

// storedCIDs are the CIDs of the archives stored in ns's snapshot space.
func storedCIDs(store storage.Store, ns string) []string {
	objs, err := store.List(ctx, storage.SnapshotSpace(ns))
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	out := []string{}
	for _, o := range objs {
		out = append(out, o.CID)
	}
	return out
}
