// Package storageversion moves agentplane's objects to their CRDs' storage version. The API
// server keeps an object in etcd in the version it was written in until it is written again,
// and each CRD's status.storedVersions lists every version objects may still be stored in; a
// version can only leave the CRDs (README "API versions") once no object is stored in it. So
// the leader, at start, rewrites every object of each CRD whose storedVersions lists more
// than the storage version (a no-op update: the API server stores it in the storage version)
// and then sets storedVersions to the storage version alone. `agentplane migrate-storage`
// runs the same on demand.
package storageversion

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/statuspatch"
)

// The migration lists and rewrites every kind (a new kind joins the list below;
// TestManagerRoleMigratesEveryKind checks the generated ClusterRole), reads the CRDs and
// updates their status.
// +kubebuilder:rbac:groups=agentplane.io,resources=workspaces;apikeys;agents;agentsecrets;skills;channels;domains;snapshots;agenttemplates;files;gatewaypools;engineupgrades;renderingrollouts,verbs=get;list;update
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions/status,verbs=update

// Discovery is the part of client-go's discovery client the migration reads: the resources
// the API server serves in a group version, with their storage version hashes.
type Discovery interface {
	ServerResourcesForGroupVersion(groupVersion string) (*metav1.APIResourceList, error)
}

// Migrator rewrites the objects of agentplane's CRDs in their storage version.
type Migrator struct {
	// Client writes the objects' no-op updates and the CRDs' status.
	Client client.Client
	// Reader reads from the API server itself (the manager's API reader): the CRDs and pages
	// of objects.
	Reader client.Reader
	// Discovery tells whether the API server stores a kind in its CRD's storage version yet.
	Discovery Discovery
	// CRDs names the CustomResourceDefinitions to migrate; one not installed is skipped.
	CRDs []string
	// PageSize is how many objects one list request returns (0: 100).
	PageSize int64
	// RetryInterval is how long Start waits after a failed pass before the next (0: 30 s);
	// StorageWait how long a pass waits for the API server to store a kind in its CRD's
	// storage version after the CRD changed (0: 30 s).
	RetryInterval, StorageWait time.Duration
	Log                        logr.Logger
}

// Start migrates, a pass every RetryInterval until one succeeds or ctx ends. A failed pass
// does not stop the manager: objects stay readable in every served version meanwhile.
func (m *Migrator) Start(ctx context.Context) error {
	interval := m.RetryInterval
	if interval <= 0 {
		interval = 30 * time.Second
	}
	for {
		err := m.MigrateAll(ctx)
		if err == nil || ctx.Err() != nil {
			return nil
		}
		m.Log.Error(err, "storage migration failed; retrying", "in", interval)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
	}
}

// NeedLeaderElection: one replica migrates.
func (m *Migrator) NeedLeaderElection() bool { return true }

// MigrateAll migrates every CRD of m.CRDs, and returns every CRD's error.
func (m *Migrator) MigrateAll(ctx context.Context) error {
	var errs []error
	for _, name := range m.CRDs {
		n, err := m.Migrate(ctx, name)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			continue
		}
		if n > 0 {
			m.Log.Info("migrated to the storage version", "crd", name, "objects", n)
		}
	}
	return errors.Join(errs...)
}

// Migrate moves the objects of the CRD name to its storage version when its
// status.storedVersions lists another version: it rewrites each object (a no-op update, in
// pages; objects deleted meanwhile are skipped, conflicts retried on a fresh read) and then
// sets storedVersions to the storage version alone. It returns how many objects it rewrote
// (0 when nothing was to do, or the CRD is not installed).
func (m *Migrator) Migrate(ctx context.Context, name string) (int, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := m.Reader.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
		if apierrors.IsNotFound(err) {
			return 0, nil
		}
		return 0, err
	}
	storage := storageVersion(crd)
	if storage == "" {
		return 0, errors.New("no storage version")
	}
	if slices.Equal(crd.Status.StoredVersions, []string{storage}) {
		return 0, nil
	}
	if err := m.waitForStorage(ctx, crd, storage); err != nil {
		return 0, err
	}
	gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: storage, Kind: crd.Spec.Names.ListKind}
	n, err := m.rewriteAll(ctx, gvk)
	if err != nil {
		return n, err
	}
	return n, m.setStoredVersions(ctx, name, storage)
}

// storageVersion is the name of crd's storage version ("" when none is).
func storageVersion(crd *apiextensionsv1.CustomResourceDefinition) string {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			return v.Name
		}
	}
	return ""
}

// waitForStorage waits until the API server's discovery names storage as the storage version
// of crd's kind: the API server switches a kind's storage after it sees the CRD change, and a
// rewrite before that would store the old version again.
func (m *Migrator) waitForStorage(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, storage string) error {
	want := StorageVersionHash(crd.Spec.Group, storage, crd.Spec.Names.Kind)
	gv := schema.GroupVersion{Group: crd.Spec.Group, Version: storage}.String()
	timeout := m.StorageWait
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	var got string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		list, err := m.Discovery.ServerResourcesForGroupVersion(gv)
		if err != nil {
			return false, nil // not served yet
		}
		for _, r := range list.APIResources {
			if r.Name == crd.Spec.Names.Plural {
				got = r.StorageVersionHash
			}
		}
		return got == want, nil
	})
	if err != nil {
		return fmt.Errorf("the API server does not store %s in %s yet (storage version hash %q, want %q): %w",
			crd.Spec.Names.Plural, gv, got, want, err)
	}
	return nil
}

// StorageVersionHash is the hash the API server's discovery gives a resource stored as
// group/version/kind (k8s.io/apiserver's discovery.StorageVersionHash, which this module does
// not link): the first 8 bytes of the SHA-256 of "group/version/kind", in base64.
func StorageVersionHash(group, version, kind string) string {
	sum := sha256.Sum256([]byte(group + "/" + version + "/" + kind))
	return base64.StdEncoding.EncodeToString(sum[:8])
}

// rewriteAll writes every object of the list kind gvk back unchanged, a page at a time. A
// continue token that expired (the list took longer than etcd keeps its revision) restarts
// the list: rewriting an object twice is harmless.
func (m *Migrator) rewriteAll(ctx context.Context, gvk schema.GroupVersionKind) (int, error) {
	page := m.PageSize
	if page <= 0 {
		page = 100
	}
	n, cont := 0, ""
	for {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk)
		err := m.Reader.List(ctx, list, client.Limit(page), client.Continue(cont))
		if apierrors.IsResourceExpired(err) && cont != "" {
			cont = ""
			continue
		}
		if err != nil {
			return n, err
		}
		for i := range list.Items {
			if err := m.rewrite(ctx, &list.Items[i]); err != nil {
				return n, err
			}
			n++
		}
		if cont = list.GetContinue(); cont == "" {
			return n, nil
		}
	}
}

// rewrite writes obj back unchanged: the API server stores it again, in the storage version.
// A conflict (the object changed since it was read) retries on a fresh read; an object
// deleted meanwhile needs nothing.
func (m *Migrator) rewrite(ctx context.Context, obj *unstructured.Unstructured) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		err := m.Client.Update(ctx, obj, client.FieldOwner(agentsv1.StorageMigrationFieldManager))
		if apierrors.IsConflict(err) {
			fresh := &unstructured.Unstructured{}
			fresh.SetGroupVersionKind(obj.GroupVersionKind())
			if gerr := m.Reader.Get(ctx, client.ObjectKeyFromObject(obj), fresh); gerr != nil {
				return gerr
			}
			*obj = *fresh
		}
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// setStoredVersions sets the CRD's status.storedVersions to storage alone, unless its storage
// version changed meanwhile (another rollout: the next pass migrates to that one).
func (m *Migrator) setStoredVersions(ctx context.Context, name, storage string) error {
	_, err := statuspatch.Run(ctx, statuspatch.Loop{
		Read: func(ctx context.Context, _ int) (client.Object, error) {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			return crd, m.Reader.Get(ctx, client.ObjectKey{Name: name}, crd)
		},
		Change: func(obj client.Object) (bool, error) {
			crd := obj.(*apiextensionsv1.CustomResourceDefinition)
			if now := storageVersion(crd); now != storage {
				return false, fmt.Errorf("the storage version changed from %s to %s during the migration", storage, now)
			}
			crd.Status.StoredVersions = []string{storage}
			return true, nil
		},
		// An update of the whole status: the read resourceVersion guards it as the patch would.
		Write: func(ctx context.Context, obj client.Object, _ client.Patch) error {
			return m.Client.Status().Update(ctx, obj, client.FieldOwner(agentsv1.StorageMigrationFieldManager))
		},
		Backoff: retry.DefaultRetry,
	})
	return err
}
