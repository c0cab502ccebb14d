package controllers_test

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	engineupgradectrl "github.com/agentplane/agentplane/controllers/engineupgrade"
	renderingrolloutctrl "github.com/agentplane/agentplane/controllers/renderingrollout"
	"github.com/agentplane/agentplane/internal/adapters/engine"
	"github.com/agentplane/agentplane/internal/rules/admission"
)

var upgradeVersions = admission.Versions{Default: engine.PinnedVersion, Available: []string{"2026.9.5", engine.PinnedVersion, "2026.9.7"}}

// agentDouble plays the Agent and Snapshot controllers for the agents of its namespaces: an
// agent runs the version its spec names (Ready), unless that version is broken (its gateway
// crashes); a restore the spec asks for is carried out at once; a Snapshot completes at once
// unless snapshots are held.
type agentDouble struct {
	client.Client
	namespaces map[string]bool

	mu            sync.Mutex
	broken        map[string]bool
	holdSnapshots bool
	failSnapshots bool
	// platform, when set, is the manager's rendering (renderingDouble); brokenRendering makes
	// a gateway on it crash.
	platform        string
	brokenRendering bool
}

func (d *agentDouble) setBroken(v string, broken bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.broken[v] = broken
}

func (d *agentDouble) hold(h bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.holdSnapshots = h
}

func (d *agentDouble) reconcileAgent(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	a := &agentsv1.Agent{}
	if !d.namespaces[req.Namespace] || d.Get(ctx, req.NamespacedName, a) != nil {
		return ctrl.Result{}, nil
	}
	before := a.DeepCopy()
	v, _ := upgradeVersions.Resolve(a.Spec.Engine.Version)
	d.mu.Lock()
	broken := d.broken[v]
	d.mu.Unlock()
	a.Status.ObservedGeneration, a.Status.EngineVersion = a.Generation, v
	ready := metav1.Condition{Type: agentsv1.ConditionReady, Status: metav1.ConditionTrue, Reason: agentsv1.ReasonHealthy, Message: "ok"}
	a.Status.Phase = agentsv1.AgentRunning
	if broken {
		a.Status.Phase = agentsv1.AgentNotRunning
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, agentsv1.ReasonCrashed, "exit 1"
	}
	if d.platform != "" && d.render(a) {
		a.Status.Phase = agentsv1.AgentNotRunning
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, agentsv1.ReasonCrashed, "exit 1"
	}
	meta.SetStatusCondition(&a.Status.Conditions, ready)
	if a.Spec.DesiredSnapshot != "" && (a.Spec.DesiredSnapshot != a.Status.SnapshotCID ||
		a.Spec.RestoreRequestedAt != nil && (a.Status.LastRestoreAt == nil || a.Status.LastRestoreAt.Before(a.Spec.RestoreRequestedAt))) {
		a.Status.SnapshotCID, a.Status.LastRestoreAt = a.Spec.DesiredSnapshot, a.Spec.RestoreRequestedAt.DeepCopy()
	}
	if equality.Semantic.DeepEqual(a.Status, before.Status) {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, client.IgnoreNotFound(d.Status().Update(ctx, a))
}

func (d *agentDouble) reconcileSnapshot(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	sn := &agentsv1.Snapshot{}
	if !d.namespaces[req.Namespace] || d.Get(ctx, req.NamespacedName, sn) != nil || sn.Status.Phase != "" {
		return ctrl.Result{}, nil
	}
	d.mu.Lock()
	held, fail := d.holdSnapshots, d.failSnapshots
	d.mu.Unlock()
	if held {
		return ctrl.Result{RequeueAfter: 100 * time.Millisecond}, nil
	}
	if fail {
		sn.Status.Phase = agentsv1.SnapshotFailed
		return ctrl.Result{}, client.IgnoreNotFound(d.Status().Update(ctx, sn))
	}
	sn.Status.Phase, sn.Status.CID, sn.Status.Size = agentsv1.SnapshotCompleted, fakeCID(sn.Name), 1
	return ctrl.Result{}, client.IgnoreNotFound(d.Status().Update(ctx, sn))
}

// startAgentDouble runs the double over namespaces until the spec ends.
func startAgentDouble(namespaces ...string) *agentDouble {
	mgr := newManager()
	d := &agentDouble{Client: mgr.GetClient(), namespaces: map[string]bool{}, broken: map[string]bool{}}
	for _, ns := range namespaces {
		d.namespaces[ns] = true
	}
	Expect(ctrl.NewControllerManagedBy(mgr).For(&agentsv1.Agent{}).Named("agent-double").Complete(reconcilerFunc(d.reconcileAgent))).To(Succeed())
	Expect(ctrl.NewControllerManagedBy(mgr).For(&agentsv1.Snapshot{}).Named("snapshot-double").Complete(reconcilerFunc(d.reconcileSnapshot))).To(Succeed())
	DeferCleanup(startManager(mgr))
	return d
}

type reconcilerFunc func(context.Context, ctrl.Request) (ctrl.Result, error)

func (f reconcilerFunc) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return f(ctx, req)
}

// startUpgradeManager runs the EngineUpgrade controller with clk (and its metrics in reg,
// when given); the returned func stops it.
func startUpgradeManager(clk clock.PassiveClock, reg ...prometheus.Registerer) func() {
	mgr := newManager()
	r := &engineupgradectrl.Reconciler{
		Client: mgr.GetClient(), Versions: upgradeVersions, Clock: clk,
		Recorder: mgr.GetEventRecorder("engineupgrade-test"),
	}
	if len(reg) > 0 {
		r.Metrics = reg[0]
	}
	Expect(r.SetupWithManager(mgr)).To(Succeed())
	return startManager(mgr)
}

// fakeCID is a CID-shaped name for a Snapshot (`b` and base32).
func fakeCID(name string) string {
	sum := sha256.Sum256([]byte(name))
	return "b" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:]))
}

func upgradeAgents(ns string, n int, version string) []*agentsv1.Agent {
	Expect(k8sClient.Create(ctx, namespace(ns))).To(Succeed())
	var out []*agentsv1.Agent
	for i := range n {
		out = append(out, createAgent(ns, "agent-"+string(rune('a'+i)), func(a *agentsv1.Agent) { a.Spec.Engine.Version = version }))
	}
	return out
}

func createUpgrade(name, ns, version string, mut ...func(*agentsv1.EngineUpgrade)) *agentsv1.EngineUpgrade {
	eu := &agentsv1.EngineUpgrade{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: agentsv1.EngineUpgradeSpec{Version: version, Workspaces: []string{ns}}}
	for _, m := range mut {
		m(eu)
	}
	Expect(k8sClient.Create(ctx, eu)).To(Succeed())
	DeferCleanup(func() { _ = k8sClient.Delete(context.Background(), eu) })
	return eu
}

func getUpgrade(name string) *agentsv1.EngineUpgrade {
	eu := &agentsv1.EngineUpgrade{}
	Expect(k8sClient.Get(ctx, client.ObjectKey{Name: name}, eu)).To(Succeed())
	return eu
}

func updateUpgrade(name string, f func(*agentsv1.EngineUpgrade)) {
	Eventually(func() error {
		eu := getUpgrade(name)
		f(eu)
		return k8sClient.Update(ctx, eu)
	}).Should(Succeed())
}

// pokeAgents touches an annotation of each agent: the controllers look again.
func pokeAgents(agents []*agentsv1.Agent) {
	for _, a := range agents {
		Eventually(func() error {
			got := getAgent(a)
			if got.Annotations == nil {
				got.Annotations = map[string]string{}
			}
			got.Annotations["test/poke"] = time.Now().String()
			return k8sClient.Update(ctx, got)
		}).Should(Succeed())
	}
}

// upgradeSnapshots are the Snapshots the controller took of the agent.
func upgradeSnapshots(a *agentsv1.Agent) []agentsv1.Snapshot {
	list := &agentsv1.SnapshotList{}
	Expect(k8sClient.List(ctx, list, client.InNamespace(a.Namespace), client.MatchingLabels{agentsv1.LabelAgent: a.Name})).To(Succeed())
	return list.Items
}

// eventReasons are the reasons of the events regarding the object of that kind and name.
func eventReasons(kind, name string) func() []string {
	return func() []string {
		list := &eventsv1.EventList{}
		Expect(k8sClient.List(ctx, list)).To(Succeed())
		var out []string
		for _, e := range list.Items {
			if e.Regarding.Kind == kind && e.Regarding.Name == name {
				out = append(out, e.Reason)
			}
		}
		return out
	}
}

// render plays the kube runtime's renderings for the double's manager (platform): an agent's
// gateway runs an earlier manager's rendering until agentplane.io/allowed-rendering names
// the manager's, then restarts onto it. It reports a gateway that crashes on it
// (brokenRendering).
func (d *agentDouble) render(a *agentsv1.Agent) (crashed bool) {
	target := d.platform + ".agent-" + a.Name
	a.Status.RenderingTarget, a.Status.Rendering = target, agentsv1.RenderingOutdated
	if a.Annotations[agentsv1.AnnotationAllowedRendering] != target {
		return false
	}
	a.Status.Rendering = agentsv1.RenderingCurrent
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.brokenRendering
}

// startRenderingManager runs the RenderingRollout controller of the manager's rendering
// platform with clk; the returned func stops it.
func startRenderingManager(platform string, clk clock.PassiveClock) func() {
	mgr := newManager()
	Expect((&renderingrolloutctrl.Reconciler{
		Client: mgr.GetClient(), Platform: platform, Clock: clk,
		Recorder: mgr.GetEventRecorder("renderingrollout-test"),
	}).SetupWithManager(mgr)).To(Succeed())
	return startManager(mgr)
}

func getRollout(name string) *agentsv1.RenderingRollout {
	rr := &agentsv1.RenderingRollout{}
	Expect(k8sClient.Get(ctx, client.ObjectKey{Name: name}, rr)).To(Succeed())
	return rr
}
