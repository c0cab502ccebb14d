package recovery

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/snapshotstore"
	"github.com/agentplane/agentplane/internal/adapters/storage"
	"github.com/agentplane/agentplane/internal/rules/quota"
)

// checkArchives compares workspace ns's snapshot archives with its Snapshots.
func (d Doctor) checkArchives(ctx context.Context, w *world, ns string, rep *Report) error {
	space := storage.SnapshotSpace(ns)
	objs, err := d.Store.List(ctx, space)
	if err != nil {
		return fmt.Errorf("list %s: %w", space, err)
	}
	links, err := snapshotstore.ReadLinks(ctx, d.Store, ns)
	if err != nil {
		return fmt.Errorf("read the snapshot links of %s: %w", ns, err)
	}
	rep.Checked.Archives += len(objs)
	stored := map[string]bool{}
	for _, o := range objs {
		stored[o.CID] = true
	}
	named := map[string]bool{} // CIDs a Snapshot names (recorded, or being relinked)
	byName := map[string]bool{}
	for _, s := range w.snaps[ns] {
		byName[s.Name] = true
		for _, c := range []string{s.Status.CID, s.Annotations[agentsv1.AnnotationSnapshotRelink]} {
			if cc, err := storage.CanonicalCID(c); err == nil {
				named[cc] = true
			}
		}
		if s.Status.Phase == agentsv1.SnapshotCompleted && s.Status.CID != "" && !stored[canonical(s.Status.CID)] {
			rep.Findings = append(rep.Findings, Finding{
				Kind: MissingArchive, Namespace: ns, Name: s.Name,
				Detail: fmt.Sprintf("the Snapshot of agent %q records the archive %s, which storage does not hold", s.Spec.AgentRef.Name, s.Status.CID),
				Repair: "none: restore the archive into storage (space " + space + "), or delete the Snapshot",
			})
		}
	}
	for _, o := range objs {
		if named[o.CID] || w.templated[o.CID] {
			continue
		}
		rep.Findings = append(rep.Findings, unlinked(w, ns, o, links, byName))
	}
	return nil
}

// unlinked is the finding of archive o, which nothing names: relinkable when a link record
// names a Snapshot that does not exist of an agent that does.
func unlinked(w *world, ns string, o storage.Object, links []snapshotstore.Link, snapNamed map[string]bool) Finding {
	f := Finding{
		Kind: UnlinkedArchive, Namespace: ns, Name: o.CID,
		Detail: fmt.Sprintf("%d bytes; no link record says whose it is (archived before link records existed)", o.Size),
		Repair: "none: create a Snapshot with the annotation " + agentsv1.AnnotationSnapshotRelink + "=" + o.CID + " for its agent, or delete the archive yourself",
	}
	for i := range links {
		l := links[i]
		if canonical(l.CID) != o.CID {
			continue
		}
		f.Detail = fmt.Sprintf("%d bytes, Snapshot %q of agent %q", o.Size, l.Snapshot, l.Agent)
		switch {
		case snapNamed[l.Snapshot]:
			f.Repair = fmt.Sprintf("none: a Snapshot %q exists with another archive; create one with the annotation %s=%s", l.Snapshot, agentsv1.AnnotationSnapshotRelink, o.CID)
		case w.agent(ns, l.Agent) == nil:
			f.Repair = fmt.Sprintf("re-create the Agent %q first, then run --repair: it re-creates the Snapshot", l.Agent)
		default:
			f.Repair = fmt.Sprintf("re-create the Snapshot %q of agent %q from storage", l.Snapshot, l.Agent)
			f.link = &l
			return f
		}
	}
	return f
}

// canonical is c's canonical form (c itself when it does not parse).
func canonical(c string) string {
	if cc, err := storage.CanonicalCID(c); err == nil {
		return cc
	}
	return c
}

// Repair does what the report's findings say --repair does: it re-creates the Snapshots
// storage's link records name (the Snapshot controller records their archives again, within
// the snapshot quota) and recounts the counts that disagree. It creates and recounts only,
// never deletes. It returns the findings it acted on.
func (d Doctor) Repair(ctx context.Context, c client.Client, rep *Report) ([]Finding, error) {
	lim := &quota.Limiter{Reader: d.Reader, Writer: c}
	var done []Finding
	var errs []error
	for _, f := range rep.Findings {
		var err error
		switch {
		case f.link != nil:
			err = c.Create(ctx, snapshotstore.Relinked(*f.link))
			if apierrors.IsAlreadyExists(err) {
				continue // made meanwhile: the next check tells
			}
		case f.recount == agentSlots:
			err = lim.RecountAgents(ctx, f.Namespace)
		case f.recount != "":
			err = lim.RecountStorage(ctx, f.Namespace, f.recount)
		default:
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %s/%s: %w", f.Kind, f.Namespace, f.Name, err))
			continue
		}
		done = append(done, f)
	}
	return done, errors.Join(errs...)
}
