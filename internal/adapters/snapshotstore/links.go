// Package snapshotstore keeps where snapshot archives sit in storage: the records that link an
// archive to its Snapshot (Link), and the search for the space that holds an archive (Locator).
package snapshotstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/cid"
	"github.com/agentplane/agentplane/internal/adapters/storage"
)

// A snapshot archive is keyed by its CID alone: nothing in storage says whose home it is. A
// Link is the record that does, stored beside the archives (LinkSpace) when the Snapshot
// controller completes a Snapshot, so the Snapshots a restored control plane lost can be
// re-created from storage (`agentplane doctor --repair`). It is content-addressed like
// everything in storage: the same Snapshot always gives the same record, so the controller
// finds it again to delete it with the Snapshot.
type Link struct {
	// Kind marks the record ("agentplane.io/snapshot-link").
	Kind string `json:"kind"`
	// Namespace, Snapshot and Agent name the Snapshot and the agent it archived.
	Namespace string `json:"namespace"`
	Snapshot  string `json:"snapshot"`
	Agent     string `json:"agent"`
	// CID and Size are the archive's.
	CID  string `json:"cid"`
	Size int64  `json:"size"`
	// RequestedAt is the Snapshot's AnnotationSnapshotRequestedAt (its place in the history).
	RequestedAt string `json:"requestedAt,omitempty"`
}

// linkKind is Link.Kind.
const linkKind = "agentplane.io/snapshot-link"

// maxLinkSize bounds a record read back (they are a few hundred bytes).
const maxLinkSize = 16 << 10

// LinkSpace is the key space of namespace's snapshot links, nested in its snapshot space
// (whose List leaves it out).
func LinkSpace(namespace string) string { return storage.SnapshotSpace(namespace) + "/links" }

// LinkOf is the record of a completed Snapshot.
func LinkOf(s *agentsv1.Snapshot) Link {
	return Link{
		Kind: linkKind, Namespace: s.Namespace, Snapshot: s.Name, Agent: s.Spec.AgentRef.Name,
		CID: s.Status.CID, Size: s.Status.Size, RequestedAt: s.Annotations[agentsv1.AnnotationSnapshotRequestedAt],
	}
}

// encode is the record's bytes (one field order, so one CID per record).
func (l Link) encode() []byte {
	b, _ := json.Marshal(l) // a struct of strings and an int: never fails
	return b
}

// WriteLink stores s's record.
func WriteLink(ctx context.Context, store storage.Store, s *agentsv1.Snapshot) error {
	_, err := store.Put(ctx, LinkSpace(s.Namespace), bytes.NewReader(LinkOf(s).encode()))
	return err
}

// DeleteLink removes s's record; a missing one is not an error.
func DeleteLink(ctx context.Context, store storage.Store, s *agentsv1.Snapshot) error {
	c, _, err := cid.Compute(bytes.NewReader(LinkOf(s).encode()))
	if err != nil {
		return err
	}
	return store.Delete(ctx, LinkSpace(s.Namespace), c.String())
}

// ReadLinks returns the records of namespace's snapshots (those that do not parse are left
// out).
func ReadLinks(ctx context.Context, store storage.Store, namespace string) ([]Link, error) {
	space := LinkSpace(namespace)
	objs, err := store.List(ctx, space)
	if err != nil {
		return nil, err
	}
	links := make([]Link, 0, len(objs))
	for _, o := range objs {
		l, err := readLink(ctx, store, space, o.CID)
		switch {
		case errors.Is(err, storage.ErrNotFound), errors.Is(err, errNotALink):
			continue // deleted meanwhile, or not a record
		case err != nil:
			return nil, err
		}
		links = append(links, l)
	}
	return links, nil
}

var errNotALink = errors.New("not a snapshot link")

func readLink(ctx context.Context, store storage.Store, space, c string) (Link, error) {
	rc, _, err := store.Get(ctx, space, c)
	if err != nil {
		return Link{}, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, maxLinkSize+1))
	if err != nil {
		return Link{}, storage.Unavailable("read link", err)
	}
	var l Link
	if len(b) > maxLinkSize || json.Unmarshal(b, &l) != nil || l.Kind != linkKind || l.CID == "" || l.Snapshot == "" {
		return Link{}, fmt.Errorf("%w: %s/%s", errNotALink, space, c)
	}
	return l, nil
}

// Relinked is the Snapshot that records l's archive again: the controller takes the archive
// from storage (AnnotationSnapshotRelink) instead of archiving the agent's home.
func Relinked(l Link) *agentsv1.Snapshot {
	s := &agentsv1.Snapshot{
		ObjectMeta: metav1.ObjectMeta{
			Name: l.Snapshot, Namespace: l.Namespace,
			Annotations: map[string]string{agentsv1.AnnotationSnapshotRelink: l.CID},
		},
		Spec: agentsv1.SnapshotSpec{AgentRef: agentsv1.LocalObjectReference{Name: l.Agent}},
	}
	if l.RequestedAt != "" {
		s.Annotations[agentsv1.AnnotationSnapshotRequestedAt] = l.RequestedAt
	}
	return s
}
