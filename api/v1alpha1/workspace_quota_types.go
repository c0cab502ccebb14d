package v1alpha1

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// StorageKind names one of a workspace's storage quotas.
type StorageKind string

const (
	// StorageFiles: files stored by CID (`/v3/files`), one File object each.
	StorageFiles StorageKind = "files"
	// StorageSnapshots: snapshot archives, one Snapshot object each.
	StorageSnapshots StorageKind = "snapshots"
	// StorageUploads: files written into agents' homes by `POST /v0/agents/{id}/files/upload`.
	StorageUploads StorageKind = "uploads"
)

// StorageKinds are the kinds a workspace has quotas for.
var StorageKinds = []StorageKind{StorageFiles, StorageSnapshots, StorageUploads}

// Default storage quotas per plan, used for each kind whose spec.quotas field is unset.
const (
	DefaultFreeStorageBytes   int64 = 10 << 30
	DefaultFreeStorageObjects int64 = 100_000
	DefaultProStorageBytes    int64 = 100 << 30
	DefaultProStorageObjects  int64 = 1_000_000
)

// AnnotationStorageReservation names, on a File, the storage reservation its upload took: a
// recount that finds the File counts it and drops that reservation, so a reservation is never
// counted twice.
const AnnotationStorageReservation = "agentplane.io/storage-reservation"

// AnnotationUploads is, on an Agent, what `POST /v0/agents/{id}/files/upload` wrote into its
// home: "<bytes>,<files>" (written by the facade after each upload). The workspace's uploads
// count is the sum over its agents, so deleting an agent gives its uploads back.
const AnnotationUploads = "agentplane.io/uploads"

// UploadTally reads an agent's AnnotationUploads (zero when unset or malformed).
func UploadTally(a *Agent) (bytes, objects int64) {
	if _, err := fmt.Sscanf(a.Annotations[AnnotationUploads], "%d,%d", &bytes, &objects); err != nil || bytes < 0 || objects < 0 {
		return 0, 0
	}
	return bytes, objects
}

// FormatUploadTally is the value of AnnotationUploads.
func FormatUploadTally(bytes, objects int64) string { return fmt.Sprintf("%d,%d", bytes, objects) }

// StorageQuotas are a workspace's storage quotas, one per kind. An unset kind (or field) takes
// the plan's default (free: 10 GiB and 100000 objects; pro: 100 GiB and 1000000 objects).
type StorageQuotas struct {
	// Files bounds the files stored by CID (`/v3/files`, both networks together).
	// +optional
	Files *StorageQuota `json:"files,omitempty"`
	// Snapshots bounds the snapshot archives (each Snapshot counts its own size).
	// +optional
	Snapshots *StorageQuota `json:"snapshots,omitempty"`
	// Uploads bounds what `POST /v0/agents/{id}/files/upload` writes into the agents' homes.
	// +optional
	Uploads *StorageQuota `json:"uploads,omitempty"`
}

// StorageQuota bounds the bytes and the objects of one kind of storage.
type StorageQuota struct {
	// MaxBytes is the most bytes the kind may hold (a quantity: `512Mi`, `10Gi`).
	// +optional
	MaxBytes *resource.Quantity `json:"maxBytes,omitempty"`
	// MaxObjects is the most objects (files, snapshots, uploaded files) the kind may hold.
	// +kubebuilder:validation:Minimum=0
	// +optional
	MaxObjects *int64 `json:"maxObjects,omitempty"`
}

// StorageUsage is what a workspace holds of each storage quota. Written only by the quota
// Limiter (internal/rules/quota) with optimistic concurrency: the facade's reservations, settles and
// frees, the Snapshot controller's, and the Workspace controller's recounts.
type StorageUsage struct {
	// +optional
	Files StorageCount `json:"files,omitempty"`
	// +optional
	Snapshots StorageCount `json:"snapshots,omitempty"`
	// +optional
	Uploads StorageCount `json:"uploads,omitempty"`
}

// StorageCount counts one kind: Bytes and Objects are settled (written and recorded); Pending
// are reservations of writes in flight. Bytes + the pending bytes never exceed the quota, nor
// Objects + len(Pending). Its size depends on the writes in flight, never on how many objects
// the workspace holds.
type StorageCount struct {
	// +optional
	Bytes int64 `json:"bytes"`
	// +optional
	Objects int64 `json:"objects"`
	// Pending are the reservations of writes in flight (a request id, a Snapshot's name).
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=10000
	// +optional
	Pending []StorageReservation `json:"pending,omitempty"`
}

// StorageReservation holds room for one object being written.
type StorageReservation struct {
	// Name identifies the write (unique among the kind's pending reservations).
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Bytes reserved (0 when the size is not known before the write: a snapshot).
	// +optional
	Bytes int64 `json:"bytes,omitempty"`
	// Time the reservation was made.
	Time metav1.Time `json:"time"`
}

// Count returns the count of kind (nil for an unknown kind).
func (u *StorageUsage) Count(kind StorageKind) *StorageCount {
	switch kind {
	case StorageFiles:
		return &u.Files
	case StorageSnapshots:
		return &u.Snapshots
	case StorageUploads:
		return &u.Uploads
	}
	return nil
}

// Taken is what the count holds, settled and pending.
func (c *StorageCount) Taken() (bytes, objects int64) {
	bytes, objects = c.Bytes, c.Objects+int64(len(c.Pending))
	for _, r := range c.Pending {
		bytes += r.Bytes
	}
	return bytes, objects
}

// StorageLimit is a quota in force.
type StorageLimit struct {
	MaxBytes, MaxObjects int64
}

// Fits reports whether bytes more and objects more fit beside what c holds.
func (q StorageLimit) Fits(c *StorageCount, bytes, objects int64) bool {
	b, o := c.Taken()
	return b+bytes <= q.MaxBytes && o+objects <= q.MaxObjects
}

// EffectiveStorageQuota is spec.quotas' limit of kind, each field unset taking the plan's
// default.
func (w *Workspace) EffectiveStorageQuota(kind StorageKind) StorageLimit {
	l := StorageLimit{MaxBytes: DefaultFreeStorageBytes, MaxObjects: DefaultFreeStorageObjects}
	if w.Spec.Plan == PlanPro {
		l = StorageLimit{MaxBytes: DefaultProStorageBytes, MaxObjects: DefaultProStorageObjects}
	}
	var q *StorageQuota
	if w.Spec.Quotas != nil {
		switch kind {
		case StorageFiles:
			q = w.Spec.Quotas.Files
		case StorageSnapshots:
			q = w.Spec.Quotas.Snapshots
		case StorageUploads:
			q = w.Spec.Quotas.Uploads
		}
	}
	if q != nil && q.MaxBytes != nil {
		l.MaxBytes = q.MaxBytes.Value()
	}
	if q != nil && q.MaxObjects != nil {
		l.MaxObjects = *q.MaxObjects
	}
	return l
}
