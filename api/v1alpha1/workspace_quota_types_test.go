package v1alpha1

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestEffectiveStorageQuota(t *testing.T) {
	free := &Workspace{Spec: WorkspaceSpec{Plan: PlanFree}}
	if got := free.EffectiveStorageQuota(StorageFiles); got != (StorageLimit{10 << 30, 100_000}) {
		t.Fatalf("free default: %+v", got)
	}
	pro := &Workspace{Spec: WorkspaceSpec{Plan: PlanPro, Quotas: &StorageQuotas{
		Snapshots: &StorageQuota{MaxBytes: resource.NewQuantity(512<<20, resource.BinarySI)},
		Uploads:   &StorageQuota{MaxObjects: ptr.To[int64](7)},
	}}}
	for kind, want := range map[StorageKind]StorageLimit{
		StorageFiles:     {100 << 30, 1_000_000},
		StorageSnapshots: {512 << 20, 1_000_000},
		StorageUploads:   {100 << 30, 7},
	} {
		if got := pro.EffectiveStorageQuota(kind); got != want {
			t.Errorf("pro %s: got %+v, want %+v", kind, got, want)
		}
	}
}

func TestStorageLimitFitsCountsPending(t *testing.T) {
	c := &StorageCount{Bytes: 60, Objects: 1, Pending: []StorageReservation{{Name: "a", Bytes: 30, Time: metav1.Now()}}}
	l := StorageLimit{MaxBytes: 100, MaxObjects: 3}
	if !l.Fits(c, 10, 1) {
		t.Error("100 of 100 bytes and 3 of 3 objects must fit")
	}
	if l.Fits(c, 11, 1) {
		t.Error("101 bytes must not fit")
	}
	if l.Fits(c, 0, 2) {
		t.Error("4 objects must not fit")
	}
}

func TestUploadTally(t *testing.T) {
	for value, want := range map[string][2]int64{
		"": {0, 0}, "10,2": {10, 2}, "x": {0, 0}, "-5,1": {0, 0}, FormatUploadTally(1<<40, 9): {1 << 40, 9},
	} {
		a := &Agent{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationUploads: value}}}
		if b, o := UploadTally(a); [2]int64{b, o} != want {
			t.Errorf("%q: got %d,%d, want %v", value, b, o, want)
		}
	}
}
