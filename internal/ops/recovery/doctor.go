// Package recovery compares what the API server, the runtime and storage hold after a control
// plane came back from a backup (`agentplane doctor`): agent homes no Agent names, Agents
// without a home, snapshot archives no Snapshot records, Snapshots whose archive is gone and
// workspace counts that disagree with the objects. It repairs only on request, and only by
// creating objects (a lost Snapshot, from the record storage keeps of it): it never deletes.
package recovery

import (
	"context"
	"fmt"
	"sort"

	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/adapters/snapshotstore"
	"github.com/agentplane/agentplane/internal/adapters/storage"
)

// Kind is what a Finding found.
type Kind string

// Kinds of findings.
const (
	// OrphanHome: the runtime keeps a home no Agent names. It is never deleted: an Agent
	// re-created with the same namespace and name runs on it again.
	OrphanHome Kind = "OrphanHome"
	// MissingHome: an Agent the controller observed (it has a phase) whose home the runtime
	// does not keep. The Agent controller gives it a fresh (empty) home on its next pass.
	MissingHome Kind = "MissingHome"
	// UnlinkedArchive: storage holds a snapshot archive no Snapshot (and no AgentTemplate)
	// names. Relinkable when a link record names its Snapshot and the agent exists.
	UnlinkedArchive Kind = "UnlinkedArchive"
	// MissingArchive: a completed Snapshot whose archive storage does not hold.
	MissingArchive Kind = "MissingArchive"
	// CountMismatch: a workspace's count disagrees with its objects. The Workspace controller
	// recounts agent slots by itself once nothing is in flight, the snapshot count only when a
	// reservation is stale; `--repair` recounts both from the objects.
	CountMismatch Kind = "CountMismatch"
)

// Finding is one disagreement.
type Finding struct {
	Kind      Kind   `json:"kind"`
	Namespace string `json:"namespace"`
	// Name is the agent's, the Snapshot's or the workspace's name, or the archive's CID.
	Name   string `json:"name"`
	Detail string `json:"detail"`
	// Repair says what `--repair` does about it, or what is left to a person.
	Repair string `json:"repair"`

	link    *snapshotstore.Link  // the record that relinks an UnlinkedArchive, when one can
	recount agentsv1.StorageKind // the count a CountMismatch recounts (agentSlots: the agent slots)
}

// agentSlots stands for the agent slots in Finding.recount.
const agentSlots = "agentSlots"

// Report is what Check found.
type Report struct {
	Findings []Finding `json:"findings"`
	// Checked counts what was compared.
	Checked Checked `json:"checked"`
}

// Checked counts the objects a Report compared.
type Checked struct {
	Workspaces int `json:"workspaces"`
	Agents     int `json:"agents"`
	Homes      int `json:"homes"`
	Snapshots  int `json:"snapshots"`
	Archives   int `json:"archives"`
}

// Agree reports whether nothing disagrees.
func (r *Report) Agree() bool { return len(r.Findings) == 0 }

// Doctor compares the API server's objects with the runtime's homes and storage's archives.
type Doctor struct {
	// Reader lists the objects (a live reader: a cache may lag).
	Reader client.Reader
	// Homes lists the runtime's homes (runtime.Inventory); nil checks no homes.
	Homes func(ctx context.Context) ([]runtime.Home, error)
	// Store holds the snapshot archives; nil checks no archives.
	Store storage.Store
}

// world is what Check read.
type world struct {
	workspaces []agentsv1.Workspace
	agents     map[string][]agentsv1.Agent    // by namespace
	snaps      map[string][]agentsv1.Snapshot // by namespace
	templated  map[string]bool                // CIDs AgentTemplates name
}

// Check reads the three and reports what disagrees.
func (d Doctor) Check(ctx context.Context) (*Report, error) {
	w, err := d.read(ctx)
	if err != nil {
		return nil, err
	}
	rep := &Report{Findings: []Finding{}}
	rep.Checked.Workspaces = len(w.workspaces)
	for _, as := range w.agents {
		rep.Checked.Agents += len(as)
	}
	for _, ss := range w.snaps {
		rep.Checked.Snapshots += len(ss)
	}
	if d.Homes != nil {
		if err := d.checkHomes(ctx, w, rep); err != nil {
			return nil, err
		}
	}
	if d.Store != nil {
		for _, ws := range w.workspaces {
			if err := d.checkArchives(ctx, w, ws.Name, rep); err != nil {
				return nil, err
			}
		}
	}
	for i := range w.workspaces {
		checkCounts(&w.workspaces[i], w, rep)
	}
	sort.SliceStable(rep.Findings, func(i, j int) bool {
		a, b := rep.Findings[i], rep.Findings[j]
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	return rep, nil
}

func (d Doctor) read(ctx context.Context) (*world, error) {
	w := &world{agents: map[string][]agentsv1.Agent{}, snaps: map[string][]agentsv1.Snapshot{}, templated: map[string]bool{}}
	var wss agentsv1.WorkspaceList
	if err := d.Reader.List(ctx, &wss); err != nil {
		return nil, fmt.Errorf("list workspaces: %w", err)
	}
	w.workspaces = wss.Items
	var agents agentsv1.AgentList
	if err := d.Reader.List(ctx, &agents); err != nil {
		return nil, fmt.Errorf("list agents: %w", err)
	}
	for _, a := range agents.Items {
		w.agents[a.Namespace] = append(w.agents[a.Namespace], a)
	}
	var snaps agentsv1.SnapshotList
	if err := d.Reader.List(ctx, &snaps); err != nil {
		return nil, fmt.Errorf("list snapshots: %w", err)
	}
	for _, s := range snaps.Items {
		w.snaps[s.Namespace] = append(w.snaps[s.Namespace], s)
	}
	var templates agentsv1.AgentTemplateList
	if err := d.Reader.List(ctx, &templates); err != nil {
		return nil, fmt.Errorf("list agent templates: %w", err)
	}
	for _, t := range templates.Items {
		if c, err := storage.CanonicalCID(t.Spec.SnapshotCID); err == nil {
			w.templated[c] = true
		}
	}
	return w, nil
}

// agent is the Agent namespace/name, if it exists.
func (w *world) agent(namespace, name string) *agentsv1.Agent {
	for i, a := range w.agents[namespace] {
		if a.Name == name {
			return &w.agents[namespace][i]
		}
	}
	return nil
}

// checkHomes compares the runtime's homes with the Agents.
func (d Doctor) checkHomes(ctx context.Context, w *world, rep *Report) error {
	homes, err := d.Homes(ctx)
	if err != nil {
		return fmt.Errorf("list the runtime's homes: %w", err)
	}
	rep.Checked.Homes = len(homes)
	kept := map[[2]string]bool{}
	for _, h := range homes {
		kept[[2]string{h.Namespace, h.Name}] = true
		if w.agent(h.Namespace, h.Name) == nil {
			rep.Findings = append(rep.Findings, Finding{
				Kind: OrphanHome, Namespace: h.Namespace, Name: h.Name,
				Detail: "the runtime keeps the home " + h.Location + " and no Agent names it",
				Repair: "none (never deleted): re-create the Agent with this namespace and name to run it on this home again, or delete the home yourself",
			})
		}
	}
	for ns, as := range w.agents {
		for _, a := range as {
			// An Agent no pass observed yet (no phase) is being provisioned: no home is due.
			if a.DeletionTimestamp == nil && a.Status.Phase != "" && !kept[[2]string{ns, a.Name}] {
				rep.Findings = append(rep.Findings, Finding{
					Kind: MissingHome, Namespace: ns, Name: a.Name,
					Detail: fmt.Sprintf("the Agent (phase %q) has no home on the runtime", a.Status.Phase),
					Repair: "none needed: the Agent controller starts it with a fresh, empty home (restore a snapshot into it to get its files back)",
				})
			}
		}
	}
	return nil
}

// checkCounts compares a workspace's agent slots and snapshot count with its objects.
func checkCounts(ws *agentsv1.Workspace, w *world, rep *Report) {
	var bound int32
	for _, a := range w.agents[ws.Name] {
		if a.Status.HoldsSlot {
			bound++
		}
	}
	slots := ws.Status.AgentSlots
	if len(slots.Pending) == 0 && len(slots.Releasing) == 0 && slots.Used != bound {
		rep.Findings = append(rep.Findings, Finding{
			Kind: CountMismatch, Namespace: ws.Name, Name: ws.Name,
			Detail:  fmt.Sprintf("agentSlots.used is %d, %d agents hold a slot", slots.Used, bound),
			Repair:  "recount the slots from the Agents (the Workspace controller also does once nothing is in flight)",
			recount: agentsv1.StorageKind(agentSlots),
		})
	}
	var bytes, objects int64
	for _, s := range w.snaps[ws.Name] {
		if s.Status.Phase == agentsv1.SnapshotCompleted && s.DeletionTimestamp == nil {
			bytes, objects = bytes+s.Status.Size, objects+1
		}
	}
	c := ws.Status.Storage.Snapshots
	if len(c.Pending) == 0 && (c.Bytes != bytes || c.Objects != objects) {
		rep.Findings = append(rep.Findings, Finding{
			Kind: CountMismatch, Namespace: ws.Name, Name: ws.Name,
			Detail:  fmt.Sprintf("storage.snapshots counts %d snapshots of %d bytes, the completed Snapshots are %d of %d bytes", c.Objects, c.Bytes, objects, bytes),
			Repair:  "recount the snapshot quota from the completed Snapshots",
			recount: agentsv1.StorageSnapshots,
		})
	}
}
