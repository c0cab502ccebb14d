package controllers_test

import (
	"encoding/json"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	agentctrl "github.com/agentplane/agentplane/controllers/agent"
	workspacectrl "github.com/agentplane/agentplane/controllers/workspace"
	"github.com/agentplane/agentplane/internal/adapters/engine"
	"github.com/agentplane/agentplane/internal/adapters/engine/openclaw"
	"github.com/agentplane/agentplane/internal/adapters/modelproxy"
	"github.com/agentplane/agentplane/internal/adapters/modelproxy/kubeaccess"
	"github.com/agentplane/agentplane/internal/adapters/runtime/kube"
	"github.com/agentplane/agentplane/internal/rules/admission"
	"github.com/agentplane/agentplane/internal/rules/quota"
)

// One writer per status field (docs/ARCHITECTURE.md's Status writers): after a scenario that
// touches every writer (the Agent and Workspace controllers, the quota's agent slots, storage
// and domain slots with their pruning, the model usage recorder), the API server's
// managedFields of each status field name only the manager agentsv1.StatusFieldManager gives
// it.
var _ = Describe("Status writers", Ordered, func() {
	var (
		stop    func()
		limiter *quota.Limiter
	)
	BeforeAll(func() {
		mgr := newManager()
		limiter = &quota.Limiter{Reader: mgr.GetAPIReader(), Writer: mgr.GetClient(), Agents: mgr.GetCache()}
		rt := kube.New(kube.Options{
			Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), RESTConfig: mgr.GetConfig(),
			Scheme: mgr.GetScheme(), Engine: openclaw.New(),
		})
		Expect((&agentctrl.Reconciler{
			Client: mgr.GetClient(), Runtime: rt,
			Admission: &admission.Admitter{
				Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Cache: mgr.GetClient(), Limiter: limiter,
				Versions: admission.Versions{Default: engine.PinnedVersion, Available: []string{engine.PinnedVersion}},
			},
		}).SetupWithManager(mgr)).To(Succeed())
		Expect((&workspacectrl.Reconciler{Client: mgr.GetClient(), Limiter: limiter}).SetupWithManager(mgr)).To(Succeed())
		stop = startManager(mgr)
	})
	AfterAll(func() { stop() })

	It("gives each status field the one manager of the table", func() {
		ns := agentWorkspace("status-owners", 3)
		Expect(limiter.ReserveAgent(ctx, ns, "kept")).To(Succeed()) // the REST door reserves first
		kept, gone := createAgent(ns, "kept"), createAgent(ns, "gone")
		for _, a := range []*agentsv1.Agent{kept, gone} {
			Eventually(func() bool { return getAgent(a).Status.HoldsSlot }).Should(BeTrue())
		}

		By("the quota: domain slots, one pruned as stale, and storage reserved and settled")
		key := client.ObjectKeyFromObject(kept)
		Expect(limiter.ReserveDomain(ctx, key, "never-created")).To(Succeed())
		stale := &quota.Limiter{Reader: k8sClient, Writer: k8sClient, StaleAfter: time.Nanosecond}
		Expect(admission.PruneSlots(ctx, k8sClient, key, stale)).To(BeTrue())
		Expect(limiter.ReserveDomain(ctx, key, "www")).To(Succeed())
		Expect(limiter.ReserveStorage(ctx, ns, agentsv1.StorageFiles, "upload-1", 100)).To(Succeed())
		Expect(limiter.SettleStorage(ctx, ns, agentsv1.StorageFiles, "upload-1", 100)).To(Succeed())
		Expect(limiter.ReserveStorage(ctx, ns, agentsv1.StorageFiles, "upload-2", 50)).To(Succeed())

		By("the usage recorder")
		day := time.Now().UTC().Format(time.DateOnly)
		(&kubeaccess.Recorder{Ledger: &oneDelta{d: modelproxy.Delta{
			Agent: ns + "/kept", Workspace: ns, Day: day, Usage: modelproxy.Usage{Requests: 1, InputTokens: 10, OutputTokens: 5},
		}}, Client: k8sClient, APIReader: k8sClient}).Flush(ctx)

		By("the controllers, after the others wrote: a spec change and a deletion")
		Expect(k8sClient.Delete(ctx, getAgent(gone))).To(Succeed())
		a := getAgent(kept)
		a.Spec.Description = "changed after the others wrote"
		Expect(k8sClient.Update(ctx, a)).To(Succeed())
		Eventually(func() bool {
			got := getAgent(kept)
			return got.Status.ObservedGeneration == got.Generation
		}).Should(BeTrue())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(gone), &agentsv1.Agent{}))
		}).Should(BeTrue())
		Eventually(func() agentsv1.WorkspaceStatus {
			ws := &agentsv1.Workspace{}
			Expect(k8sClient.Get(ctx, client.ObjectKey{Name: ns}, ws)).To(Succeed())
			return ws.Status
		}).Should(And(HaveField("Agents", int32(1)), HaveField("AgentSlots.Used", int32(1)),
			HaveField("AgentSlots.Releasing", BeEmpty()), HaveField("AgentSlots.Pending", BeEmpty())))

		ws := &agentsv1.Workspace{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: ns}, ws)).To(Succeed())
		expectStatusOwners("Workspace", ws, "agentSlots", "storage", "usage", "agents", "conditions")
		expectStatusOwners("Agent", getAgent(kept), "domainReservations", "usage", "holdsSlot", "conditions")
	})
})

// expectStatusOwners checks obj's managedFields of the status subresource: each top-level status
// field is managed by agentsv1.StatusFieldManager(kind, field) alone, and each of want is
// managed (the scenario reached its writer).
func expectStatusOwners(kind string, obj client.Object, want ...string) {
	GinkgoHelper()
	managers := map[string][]string{} // status field -> its managers
	for _, e := range obj.GetManagedFields() {
		if e.FieldsV1 == nil {
			continue
		}
		var fields map[string]map[string]any
		Expect(json.Unmarshal(e.FieldsV1.GetRawBytes(), &fields)).To(Succeed())
		for f := range fields["f:status"] {
			if field, ok := strings.CutPrefix(f, "f:"); ok {
				managers[field] = append(managers[field], e.Manager)
				Expect(e.Subresource).To(Equal("status"), "%s status.%s written through the main resource by %s", kind, field, e.Manager)
			}
		}
	}
	for field, ms := range managers {
		Expect(ms).To(ConsistOf(agentsv1.StatusFieldManager(kind, field)), "managers of %s status.%s", kind, field)
	}
	for _, field := range want {
		Expect(managers).To(HaveKey(field), "%s status.%s has no manager: the scenario missed its writer", kind, field)
	}
}

// oneDelta is a ledger holding one delta until it is drained.
type oneDelta struct {
	d       modelproxy.Delta
	drained bool
}

func (l *oneDelta) Drain() []modelproxy.Delta {
	if l.drained {
		return nil
	}
	l.drained = true
	return []modelproxy.Delta{l.d}
}

func (l *oneDelta) Restore(ds []modelproxy.Delta) {
	Expect(ds).To(BeEmpty(), "the usage write failed")
}

func (*oneDelta) Acknowledge(modelproxy.Delta, modelproxy.Totals, modelproxy.Totals) {}
