package stress

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/devtools/testenv/kubeenv"
	"github.com/agentplane/agentplane/internal/platform"
	"github.com/agentplane/agentplane/internal/rules/auth"
	"github.com/agentplane/agentplane/internal/rules/workspacens"
)

// handoverTimeout bounds a handover in the tests: generous, they check that it happens; the
// benchmark measures how fast.
const handoverTimeout = 60 * time.Second

// TestLeaderFailover: replicas of the manager, as a Deployment runs them (leader election,
// the kube runtime, a facade on each). When the leader crashes (SIGKILL), a standby takes
// over and reconciles what was written meanwhile; when the new leader stops cleanly
// (SIGTERM), the next standby takes over too. Throughout, the replica that stays up answers
// every REST request: the facade does not depend on leading.
func TestLeaderFailover(t *testing.T) {
	f := newFailover(t, false)
	crash, crashFailed := f.handover(t, "crash")
	clean, cleanFailed := f.handover(t, "clean stop")
	t.Logf("handover after a crash %s, after a clean stop %s", crash.Round(time.Millisecond), clean.Round(time.Millisecond))
	if crashFailed+cleanFailed > 0 {
		t.Errorf("the replica that stayed up failed %d requests during the crash's handover and %d during the clean stop's", crashFailed, cleanFailed)
	}
}

// BenchmarkFailover measures the handovers of the shipped manager against controller-runtime
// alone holding the same lease (runBareManager: the platform's lease settings, one reconciler
// that acknowledges an Agent's generation), the baseline, in the same run: the ratio is what
// the platform adds to the handover the lease allows (its caches, controllers and runtime
// starting on the new leader). Run it with -benchtime=1x: each iteration starts two control
// planes and five replicas of each.
func BenchmarkFailover(b *testing.B) {
	for range b.N {
		var took [2][2]time.Duration // [baseline, shipped][crash, clean stop]
		for i, bare := range []bool{true, false} {
			f := newFailover(b, bare)
			took[i][0], _ = f.handover(b, "crash")
			took[i][1], _ = f.handover(b, "clean stop")
		}
		for j, how := range []string{"crash", "clean stop"} {
			fmt.Printf("failover: handover after a %s: agentplane %s, controller-runtime alone with the same lease %s: %.2fx the baseline\n",
				how, took[1][j].Round(time.Millisecond), took[0][j].Round(time.Millisecond), took[1][j].Seconds()/took[0][j].Seconds())
		}
		b.ReportMetric(took[1][0].Seconds(), "s/crash-handover")
		b.ReportMetric(took[1][1].Seconds(), "s/clean-handover")
	}
}

// failover is a control plane with a workspace, its owner's token and two manager replicas:
// leader and standby.
type failover struct {
	cp              *kubeenv.Env
	cfg             childConfig
	tok             string
	leader, standby *child
	// replicas and agents count what was started and written, for names.
	replicas, agents int
}

const failoverWorkspace = "failover"

// newFailover starts the replicas: the platform's, or with bare controller-runtime alone with
// the platform's lease (BenchmarkFailover's baseline).
func newFailover(t testing.TB, bare bool) *failover {
	t.Helper()
	f := &failover{cp: ownControlPlane(t)}
	f.cfg = childConfigFor(f.cp.Config)
	f.cfg.Kube, f.cfg.LeaderElection, f.cfg.Bare = true, true, bare
	if err := workspacens.EnsureWorkspace(bg(), f.cp.Client, &agentsv1.Workspace{
		ObjectMeta: metav1.ObjectMeta{Name: failoverWorkspace},
		Spec:       agentsv1.WorkspaceSpec{Plan: agentsv1.PlanPro, Members: []agentsv1.WorkspaceMember{{UserID: owner, Role: agentsv1.RoleOwner}}},
	}); err != nil {
		t.Fatal(err)
	}
	key, err := auth.EnsureSigningKey(bg(), f.cp.Client, platform.DefaultSystemNamespace)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := auth.NewSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	if f.tok, _, err = auth.CreateKey(bg(), f.cp.Client, signer, auth.KeyRequest{Workspace: failoverWorkspace, UserID: owner, Scopes: []string{auth.ScopeAll}}); err != nil {
		t.Fatal(err)
	}
	rememberJWT("bearer JWT of "+failoverWorkspace, f.tok)
	// The first replica leads once it reconciles an agent; the second waits for the lease.
	f.leader = startChild(t, "replica 0", f.cfg)
	if _, err := f.reconciled(t, time.Now()); err != nil {
		t.Fatal("the first replica:", err)
	}
	f.standby = startChild(t, "replica 1", f.cfg)
	return f
}

// handover ends the leader (SIGKILL for "crash", SIGTERM otherwise) and returns how long the
// standby took to reconcile an agent written right after, and how many requests to the
// standby's facade failed meanwhile. A new standby is started for the next handover.
func (f *failover) handover(t testing.TB, how string) (time.Duration, int) {
	t.Helper()
	poll := f.pollFacade(f.standby.url)
	start := time.Now()
	if how == "crash" {
		f.leader.kill()
	} else if !f.leader.stop(handoverTimeout) {
		t.Fatalf("%s: the leader did not exit within %s of SIGTERM", how, handoverTimeout)
	}
	took, err := f.reconciled(t, start)
	failed := poll()
	if err != nil {
		t.Fatalf("%s: %v", how, err)
	}
	f.replicas++
	f.leader, f.standby = f.standby, startChild(t, fmt.Sprintf("replica %d", f.replicas+1), f.cfg)
	return took, failed
}

// reconciled writes a new agent (the kubectl door) and waits until a controller has
// reconciled it (its status acknowledges its generation); it returns the time since start.
func (f *failover) reconciled(t testing.TB, start time.Time) (time.Duration, error) {
	t.Helper()
	f.agents++
	id := fmt.Sprintf("agt-failover-%d", f.agents)
	a := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: failoverWorkspace, Name: id}, Spec: agentsv1.AgentSpec{DisplayName: id}}
	if err := f.cp.Client.Create(bg(), a); err != nil {
		t.Fatal(err)
	}
	var took time.Duration
	err := eventually(handoverTimeout, 20*time.Millisecond, func() error {
		got := agentIn(t, f.cp, failoverWorkspace, id)
		if got.Status.ObservedGeneration < got.Generation {
			return fmt.Errorf("agent %s not reconciled (observed generation %d of %d)", id, got.Status.ObservedGeneration, got.Generation)
		}
		took = time.Since(start)
		return nil
	})
	return took, err
}

// pollFacade lists the workspace's agents on url every 25 ms until the returned function is
// called; it returns how many of those requests failed (none, for a replica with no facade:
// the benchmark's baseline).
func (f *failover) pollFacade(url string) func() int {
	if url == "" {
		return func() int { return 0 }
	}
	var failed atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			if r := callWithin(5*time.Second, url, "GET", "/v0/agents", f.tok, nil); r.Status != http.StatusOK {
				failed.Add(1)
			}
			select {
			case <-stop:
				return
			case <-time.After(25 * time.Millisecond):
			}
		}
	}()
	return func() int {
		close(stop)
		wg.Wait()
		return int(failed.Load())
	}
}
