package stress

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/engine/openclaw"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/adapters/runtime/local"
	"github.com/agentplane/agentplane/internal/adapters/storage"
	localstore "github.com/agentplane/agentplane/internal/adapters/storage/local"
	"github.com/agentplane/agentplane/internal/devtools/testenv/kubeenv"
	"github.com/agentplane/agentplane/internal/ops/recovery"
	"github.com/agentplane/agentplane/internal/platform"
	"github.com/agentplane/agentplane/internal/rules/auth"
)

// recoveryWorkspace is the workspace of TestRecoveryFromStaleBackup.
const recoveryWorkspace = "recovery"

// recoveryRig is one platform's world across control planes: the local runtime's state dir and
// the storage directory outlive the control plane they served, as volumes and a blob store
// outlive a lost etcd.
type recoveryRig struct {
	t     *testing.T
	state string
	store storage.Store
	cp    *kubeenv.Env
	tok   string
	url   string
	// stopPlatform stops the running platform (and checks it left no gateway running),
	// stopControlPlane the control plane.
	stopPlatform, stopControlPlane func()
}

// newControlPlane starts a control plane for the rig (stopped when the test ends, or by
// stopControlPlane).
func (r *recoveryRig) newControlPlane() {
	r.t.Helper()
	cp, err := kubeenv.Start()
	if err != nil {
		r.t.Fatal(err)
	}
	var once sync.Once
	stop := func() { once.Do(func() { _ = cp.Stop() }) }
	r.t.Cleanup(stop)
	r.cp, r.stopControlPlane = cp, stop
}

// start starts a platform on the rig's control plane, runtime state and storage.
func (r *recoveryRig) start() {
	r.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	_, url, done, err := startPlatformOn(ctx, r.cp.Config, platform.Options{
		Runtime: platform.RuntimeOptions{
			Name: platform.RuntimeLocal, StateDir: r.state, DefaultVersion: versionGood,
			EngineDirs: map[string]string{versionGood: fakeDir},
		},
		ProvisionTimeout: provisionTimeout,
		Files:            r.store,
		// The suite's platform runs in this process too.
		SkipNameValidation: true,
	})
	if err != nil {
		cancel()
		r.t.Fatal(err)
	}
	var once sync.Once
	r.url = url
	r.stopPlatform = func() {
		once.Do(func() {
			cancel()
			if err := awaitStop("recovery platform", done, r.state); err != nil {
				r.t.Error(err)
			}
		})
	}
	r.t.Cleanup(r.stopPlatform)
}

// snapshot takes a Snapshot of agent and waits until it is completed.
func (r *recoveryRig) snapshot(agent, name string) *agentsv1.Snapshot {
	r.t.Helper()
	s := &agentsv1.Snapshot{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: recoveryWorkspace},
		Spec:       agentsv1.SnapshotSpec{AgentRef: agentsv1.LocalObjectReference{Name: agent}},
	}
	if err := r.cp.Client.Create(bg(), s); err != nil {
		r.t.Fatal(err)
	}
	return r.completed(name)
}

// completed waits until the Snapshot name is completed and returns it.
func (r *recoveryRig) completed(name string) *agentsv1.Snapshot {
	r.t.Helper()
	s := &agentsv1.Snapshot{}
	if err := eventually(settleTimeout, 100*time.Millisecond, func() error {
		if err := r.cp.Client.Get(bg(), keyOf(recoveryWorkspace, name), s); err != nil {
			return err
		}
		if s.Status.Phase != agentsv1.SnapshotCompleted {
			return fmt.Errorf("snapshot %s is %q: %v", name, s.Status.Phase, s.Status.Conditions)
		}
		return nil
	}); err != nil {
		r.t.Fatal(err)
	}
	return s
}

// running waits until every agent of ids runs.
func (r *recoveryRig) running(ids ...string) {
	r.t.Helper()
	if err := eventually(settleTimeout, 100*time.Millisecond, func() error {
		for _, id := range ids {
			if phase := agentIn(r.t, r.cp, recoveryWorkspace, id).Status.Phase; phase != agentsv1.AgentRunning {
				return fmt.Errorf("agent %s is %q", id, phase)
			}
		}
		return nil
	}); err != nil {
		r.t.Fatal(err)
	}
}

// doctor is `agentplane doctor` over the rig's control plane, runtime state and storage.
func (r *recoveryRig) doctor() recovery.Doctor {
	return recovery.Doctor{
		Reader: r.cp.Client, Store: r.store,
		Homes: func(ctx context.Context) ([]runtime.Home, error) { return local.ListHomes(ctx, r.state) },
	}
}

// check runs the doctor and returns its findings as "Kind name" strings, sorted.
func (r *recoveryRig) check() []string {
	r.t.Helper()
	rep, err := r.doctor().Check(bg())
	if err != nil {
		r.t.Fatal(err)
	}
	var out []string
	for _, f := range rep.Findings {
		out = append(out, string(f.Kind)+" "+f.Name)
	}
	slices.Sort(out)
	return out
}

// home is agent id's home directory on the local runtime.
func (r *recoveryRig) home(id string) string {
	return filepath.Join(r.state, "agents", recoveryWorkspace, id, "home")
}

// markerPath is the file the test leaves in an agent's home (the engine's workspace directory).
func (r *recoveryRig) markerPath(id string) string {
	return filepath.Join(r.home(id), openclaw.WorkspaceDir, "recovery-marker.txt")
}

// TestRecoveryFromStaleBackup restores the platform's objects from a backup taken before an
// agent (C) and its snapshot were made, into a new control plane, over the same runtime state
// and storage, after agent B's home was lost: doctor reports C's home as an orphan (kept), B's
// home as missing and C's archive as unlinked; the platform gives B a fresh home and deletes
// nothing; C re-created with its name runs on its old files; doctor --repair re-creates C's
// Snapshot from storage's link record; the workspace's counts are right; everything agrees.
func TestRecoveryFromStaleBackup(t *testing.T) {
	files, err := localstore.New(filepath.Join(t.TempDir(), "files"))
	if err != nil {
		t.Fatal(err)
	}
	r := &recoveryRig{t: t, state: filepath.Join(t.TempDir(), "state"), store: files}
	r.newControlPlane()
	workspaceIn(t, r.cp.Client, recoveryWorkspace, agentsv1.PlanPro)
	key, err := auth.EnsureSigningKey(bg(), r.cp.Client, platform.DefaultSystemNamespace)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := auth.NewSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	r.tok = tokenFrom(t, r.cp.Client, signer, recoveryWorkspace)
	r.start()
	a, b := newAgent(t, r.url, r.tok, "alpha"), newAgent(t, r.url, r.tok, "bravo")
	snapA := r.snapshot(a, "alpha-1")
	if got := r.check(); len(got) != 0 {
		t.Fatalf("doctor on a platform that agrees: %v", got)
	}

	bk, err := takeBackup(bg(), r.cp.Client, recoveryWorkspace, platform.DefaultSystemNamespace)
	if err != nil {
		t.Fatal(err)
	}
	c := newAgent(t, r.url, r.tok, "charlie")
	if err := os.WriteFile(r.markerPath(c), []byte("made after the backup\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cSpec := agentIn(t, r.cp, recoveryWorkspace, c).Spec
	snapC := r.snapshot(c, "charlie-1")
	r.stopPlatform()
	r.stopControlPlane()
	// B's volume is lost with the control plane.
	if err := os.RemoveAll(filepath.Dir(r.home(b))); err != nil {
		t.Fatal(err)
	}

	r.newControlPlane()
	if err := bk.restore(bg(), r.cp.Client); err != nil {
		t.Fatal(err)
	}
	// The restored Workspace counts what it counted at another moment than its objects (an
	// object-level backup lists kinds one after the other).
	ws := &agentsv1.Workspace{}
	if err := r.cp.Client.Get(bg(), keyOf("", recoveryWorkspace), ws); err != nil {
		t.Fatal(err)
	}
	ws.Status.AgentSlots = agentsv1.AgentSlots{Used: 5}
	ws.Status.Storage.Snapshots.Objects = 9
	if err := r.cp.Client.Status().Update(bg(), ws); err != nil {
		t.Fatal(err)
	}
	mismatch := "CountMismatch " + recoveryWorkspace
	want := []string{mismatch, mismatch, "MissingHome " + b, "OrphanHome " + c, "UnlinkedArchive " + snapC.Status.CID}
	if got := r.check(); !slices.Equal(got, want) {
		t.Fatalf("doctor after the restore: %v, want %v", got, want)
	}
	r.start()
	// The platform recounts the agent slots from the Agents by itself.
	if err := eventually(settleTimeout, 100*time.Millisecond, func() error {
		if err := r.cp.Client.Get(bg(), keyOf("", recoveryWorkspace), ws); err != nil || ws.Status.AgentSlots.Used != 2 {
			return fmt.Errorf("agent slots %+v, %v", ws.Status.AgentSlots, err)
		}
		return nil
	}); err != nil {
		t.Fatal("the restored platform's recount:", err)
	}
	// B, whose home is gone, starts again on a fresh one (its status came back from the
	// backup saying it runs: wait for the home).
	if err := eventually(settleTimeout, 100*time.Millisecond, func() error {
		_, err := os.Stat(r.home(b))
		return err
	}); err != nil {
		t.Fatal("B's fresh home:", err)
	}
	r.running(a, b)
	assertRecovered(t, r, c, cSpec, snapA, snapC)
}

// assertRecovered is the second half of TestRecoveryFromStaleBackup, on the restored platform.
func assertRecovered(t *testing.T, r *recoveryRig, c string, cSpec agentsv1.AgentSpec, snapA, snapC *agentsv1.Snapshot) {
	// The platform deleted nothing: C's home and files are there, an orphan (as root in its
	// volume, unmounted until an agent runs on it again: its files are read below, once C is
	// re-created); both archives too.
	if _, err := os.Stat(r.markerPath(c)); err != nil {
		if _, ierr := os.Stat(filepath.Join(filepath.Dir(r.home(c)), "home.img")); ierr != nil {
			t.Fatalf("C's home after the restore: %v, and no volume of it: %v", err, ierr)
		}
	}
	// The snapshot count is recounted by doctor --repair (the platform recounts it only when a
	// reservation is stale).
	want := []string{"CountMismatch " + recoveryWorkspace, "OrphanHome " + c, "UnlinkedArchive " + snapC.Status.CID}
	if got := r.check(); !slices.Equal(got, want) {
		t.Fatalf("doctor once the restored platform runs: %v, want %v", got, want)
	}
	rep, err := r.doctor().Check(bg())
	if err != nil {
		t.Fatal(err)
	}
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil || rep.Agree() || !strings.Contains(table.String(), "OrphanHome") || !strings.Contains(table.String(), "3 disagree") {
		t.Fatalf("doctor's table (agree %v, %v):\n%s", rep.Agree(), err, table.String())
	}
	// Re-created with its name, C runs on its old home.
	recreated := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Name: c, Namespace: recoveryWorkspace}, Spec: cSpec}
	if err := r.cp.Client.Create(bg(), recreated); err != nil {
		t.Fatal(err)
	}
	r.running(c)
	if b, err := os.ReadFile(r.markerPath(c)); err != nil || string(b) != "made after the backup\n" {
		t.Fatalf("C's file once re-created: %q, %v", b, err)
	}
	// --repair re-creates C's Snapshot from the archive's link record (C's files changed
	// since: an archive taken now would have another CID).
	if err := os.WriteFile(r.markerPath(c)+".2", []byte("made after the restore\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rep, err = r.doctor().Check(bg())
	if err != nil {
		t.Fatal(err)
	}
	if done, err := r.doctor().Repair(bg(), r.cp.Client, rep); err != nil || len(done) != 2 {
		t.Fatalf("repair: %v, %v", done, err)
	}
	relinked := r.completed(snapC.Name)
	if relinked.Status.CID != snapC.Status.CID || relinked.Status.Size != snapC.Status.Size || relinked.Spec.AgentRef.Name != c {
		t.Fatalf("relinked snapshot: %+v, want the CID %s of %d bytes", relinked.Status, snapC.Status.CID, snapC.Status.Size)
	}
	assertCounts(t, r, 3, snapA.Status.Size+snapC.Status.Size)
	for _, s := range []*agentsv1.Snapshot{snapA, snapC} {
		if _, err := r.store.Stat(bg(), storage.SnapshotSpace(recoveryWorkspace), s.Status.CID); err != nil {
			t.Errorf("archive of %s: %v", s.Name, err)
		}
	}
	if got := r.check(); len(got) != 0 {
		t.Fatalf("doctor after the repair: %v", got)
	}
}

// assertCounts waits until the workspace counts agents slots and snapshot bytes as its objects.
func assertCounts(t *testing.T, r *recoveryRig, agents int32, snapBytes int64) {
	t.Helper()
	ws := &agentsv1.Workspace{}
	if err := eventually(settleTimeout, 100*time.Millisecond, func() error {
		if err := r.cp.Client.Get(bg(), keyOf("", recoveryWorkspace), ws); err != nil {
			return err
		}
		s, c := ws.Status.AgentSlots, ws.Status.Storage.Snapshots
		if s.Used != agents || len(s.Pending) > 0 || c.Objects != 2 || c.Bytes != snapBytes || len(c.Pending) > 0 {
			return errors.New("not yet")
		}
		return nil
	}); err != nil {
		t.Fatalf("workspace counts: agent slots %+v, snapshots %+v; want %d agents, 2 snapshots of %d bytes",
			ws.Status.AgentSlots, ws.Status.Storage.Snapshots, agents, snapBytes)
	}
}
