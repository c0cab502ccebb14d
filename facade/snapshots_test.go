package facade_test

import (
	"net/http/httptest"
	"os"
	"strings"
	"time"

	gocid "github.com/ipfs/go-cid"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/facade"
	"github.com/agentplane/agentplane/internal/ops"
	"github.com/agentplane/agentplane/internal/rules/auth"
)

// A CID that is well formed but names nothing stored.
const strayCID = "bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy"

// snapshotWorkspace creates workspace ws (pro, room for agents) and returns its owner token.
func snapshotWorkspace(ws string) string {
	w := workspace(ws, agentsv1.PlanPro,
		agentsv1.WorkspaceMember{UserID: "ann", Role: agentsv1.RoleOwner},
		agentsv1.WorkspaceMember{UserID: "vic", Role: agentsv1.RoleViewer})
	if w.Spec.AgentLimit == nil {
		patch := client.MergeFrom(w.DeepCopy())
		w.Spec.AgentLimit = ptr.To[int32](20)
		Expect(k8sClient.Patch(ctx, w, patch)).To(Succeed())
	}
	return token(ws, "ann", "", auth.ScopeAll)
}

// snapAgent creates a running agent through url and returns its id.
func snapAgent(url, tok, name string) string {
	r := callURL(url, "POST", "/v0/agents", tok, map[string]any{"name": name})
	ExpectWithOffset(1, r.Status).To(Equal(201), r.Raw)
	return agentOf(r)["id"].(string)
}

// syncOK syncs through url and returns the snapshot.
func syncOK(url, tok, id string) map[string]any {
	r := callURL(url, "POST", "/v0/agents/"+id+"/snapshots/sync", tok, nil)
	ExpectWithOffset(1, r.Status).To(Equal(201), r.Raw)
	s := snapshotOf(r)
	ExpectWithOffset(1, s["cid"]).To(HavePrefix("baf"), r.Raw)
	ExpectWithOffset(1, s["size"]).To(BeNumerically(">", 0), r.Raw)
	ExpectWithOffset(1, s["id"]).NotTo(BeEmpty(), r.Raw)
	_, err := time.Parse(time.RFC3339Nano, s["createdAt"].(string))
	ExpectWithOffset(1, err).NotTo(HaveOccurred(), r.Raw)
	return s
}

// resetOK resets through url and returns the agent of the answer.
func resetOK(url, tok, id, cid string) map[string]any {
	r := callURL(url, "POST", "/v0/agents/"+id+"/snapshots/reset", tok, map[string]string{"snapshotCid": cid})
	ExpectWithOffset(1, r.Status).To(Equal(200), r.Raw)
	ExpectWithOffset(1, snapshotOf(r)["cid"]).To(Equal(cid), r.Raw)
	return agentOf(r)
}

// Changes the workspace in every way a restore must undo.
const changeCommand = `printf 'changed\n' > docs/a.txt && rm bin.dat && mkdir -p extra/deep && printf x > extra/deep/new.txt && chmod 600 run.sh && ln -sfn docs/a.txt link2`

var _ = Describe("Snapshots", func() {
	var tok string
	ws := "snaps-a"

	BeforeEach(func() { tok = snapshotWorkspace(ws) })

	It("syncs, lists newest first, and resets the workspace byte for byte (REST and kubectl)", func() {
		id := snapAgent(baseURL, tok, "Snapper")
		execOK(baseURL, tok, id, `mkdir -p docs && printf 'one\n' > docs/a.txt && head -c 300000 /dev/urandom > bin.dat && printf '#!/bin/sh\n' > run.sh && chmod 755 run.sh && ln -s docs link`)
		tree1 := execOK(baseURL, tok, id, treeCommand)
		Expect(tree1).To(ContainSubstring("./bin.dat"))

		first := syncOK(baseURL, tok, id)
		again := syncOK(baseURL, tok, id)
		Expect(again["cid"]).To(Equal(first["cid"]), "the same content gives the same CID")
		Expect(again["id"]).NotTo(Equal(first["id"]))

		execOK(baseURL, tok, id, changeCommand)
		tree2 := execOK(baseURL, tok, id, treeCommand)
		Expect(tree2).NotTo(Equal(tree1))
		second := syncOK(baseURL, tok, id)
		Expect(second["cid"]).NotTo(Equal(first["cid"]))
		cid1, cid2 := first["cid"].(string), second["cid"].(string)

		list := call("GET", "/v0/agents/"+id+"/snapshots", tok, nil)
		Expect(list.Status).To(Equal(200), list.Raw)
		items := list.Body["snapshots"].([]any)
		Expect(items).To(HaveLen(3))
		Expect(items[0].(map[string]any)["id"]).To(Equal(second["id"]))
		Expect(items[2].(map[string]any)["id"]).To(Equal(first["id"]))
		Expect(historyCIDs(baseURL, tok, id)).To(Equal([]string{cid2, cid1, cid1}))

		gatewayPID := func() string { b, _ := os.ReadFile(agentFile(id, "gateway.pid")); return string(b) }
		pid := gatewayPID()
		a := resetOK(baseURL, tok, id, cid1)
		Expect(a["snapshotCid"]).To(Equal(cid1))
		Expect(a["status"]).To(Equal("running"))
		Expect(execOK(baseURL, tok, id, treeCommand)).To(Equal(tree1))
		Expect(gatewayPID()).NotTo(Equal(pid), "the gateway restarted")

		// The same CID again restores again (the workspace changed since).
		execOK(baseURL, tok, id, changeCommand)
		resetOK(baseURL, tok, id, cid1)
		Expect(execOK(baseURL, tok, id, treeCommand)).To(Equal(tree1))

		// A CIDv1 in another multibase (base58btc here) names the same snapshot.
		parsed, err := gocid.Decode(cid2)
		Expect(err).NotTo(HaveOccurred())
		b58, err := parsed.StringOfBase('z')
		Expect(err).NotTo(HaveOccurred())
		r := call("POST", "/v0/agents/"+id+"/snapshots/reset", tok, map[string]string{"snapshotCid": b58})
		Expect(r.Status).To(Equal(200), r.Raw)
		Expect(snapshotOf(r)["cid"]).To(Equal(cid2))
		Expect(execOK(baseURL, tok, id, treeCommand)).To(Equal(tree2))

		// The kubectl door: spec.desiredSnapshot.
		agent := &agentsv1.Agent{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ws, Name: id}, agent)).To(Succeed())
		patch := client.MergeFrom(agent.DeepCopy())
		agent.Spec.DesiredSnapshot = cid1
		Expect(k8sClient.Patch(ctx, agent, patch)).To(Succeed())
		Eventually(func() string {
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(agent), agent)).To(Succeed())
			c := meta.FindStatusCondition(agent.Status.Conditions, agentsv1.AgentSnapshotRestored)
			if c == nil {
				return agent.Status.SnapshotCID + " (no condition)"
			}
			return agent.Status.SnapshotCID + " " + string(c.Status) + " " + c.Reason
		}).Should(Equal(cid1 + " True " + agentsv1.ReasonRestored))
		Eventually(func() string { return execOK(baseURL, tok, id, treeCommand) }).Should(Equal(tree1))

		// A kubectl Snapshot joins the history.
		snap := &agentsv1.Snapshot{
			ObjectMeta: metav1.ObjectMeta{Namespace: ws, GenerateName: "kubectl-"},
			Spec:       agentsv1.SnapshotSpec{AgentRef: agentsv1.LocalObjectReference{Name: id}},
		}
		Expect(k8sClient.Create(ctx, snap)).To(Succeed())
		Eventually(func() []string { return historyCIDs(baseURL, tok, id) }).Should(HaveLen(4))
		Expect(historyCIDs(baseURL, tok, id)[0]).To(Equal(cid1))
	})

	It("seeds an agent created from a template with the template's snapshot", func() {
		id := snapAgent(baseURL, tok, "Template author")
		execOK(baseURL, tok, id, `printf 'be helpful\n' > SOUL.md && mkdir -p memory && printf 'm\n' > memory/1.md`)
		tree := execOK(baseURL, tok, id, treeCommand)
		cid := syncOK(baseURL, tok, id)["cid"].(string)
		Expect(k8sClient.Create(ctx, &agentsv1.AgentTemplate{
			ObjectMeta: metav1.ObjectMeta{Name: "snap-seeded"},
			Spec: agentsv1.AgentTemplateSpec{
				Slug: "snap-seeded", DisplayName: "Seeded", State: agentsv1.TemplatePublished, SnapshotCID: cid,
			},
		})).To(Succeed())
		other := snapshotWorkspace("snaps-b")
		r := call("POST", "/v0/agents", other, map[string]any{"template": "snap-seeded"})
		Expect(r.Status).To(Equal(201), r.Raw)
		seeded := agentOf(r)["id"].(string)
		Eventually(func() any {
			return call("GET", "/v0/agents/"+seeded, other, nil).Body["agent"].(map[string]any)["snapshotCid"]
		},
			30*time.Second).Should(Equal(cid))
		Eventually(func() string { return execOK(baseURL, other, seeded, treeCommand) }).Should(Equal(tree))
	})

	It("answers the contract's errors", func() {
		id := snapAgent(baseURL, tok, "Errors")
		reset := func(body any) reply { return call("POST", "/v0/agents/"+id+"/snapshots/reset", tok, body) }
		for _, body := range []any{map[string]any{}, map[string]any{"snapshotCid": ""}, map[string]any{"snapshotCid": "not-a-cid"},
			map[string]any{"snapshotCid": 42}, `{"snapshotCid":`, map[string]any{"snapshotCid": strings.Repeat("b", 600)}} {
			r := reset(body)
			Expect(r.Status).To(Equal(400), "%v: %s", body, r.Raw)
			Expect(r.v0Error()).To(Equal("Invalid snapshot CID"))
		}
		r := reset(map[string]string{"snapshotCid": strayCID})
		Expect(r.Status).To(Equal(404), r.Raw)
		Expect(r.v0Error()).To(Equal("Snapshot not found"))

		// Another agent's snapshot is not in this agent's history.
		other := snapAgent(baseURL, tok, "Other")
		cid := syncOK(baseURL, tok, other)["cid"].(string)
		execOK(baseURL, tok, id, "printf different > d.txt")
		r = reset(map[string]string{"snapshotCid": cid})
		Expect(r.Status).To(Equal(404), r.Raw)
		Expect(r.v0Error()).To(Equal("Snapshot not found"))

		for _, path := range []string{"/snapshots", "/snapshots/sync", "/snapshots/reset"} {
			method := "POST"
			if path == "/snapshots" {
				method = "GET"
			}
			r := call(method, "/v0/agents/agt-missing"+path, tok, map[string]string{"snapshotCid": cid})
			Expect(r.Status).To(Equal(404), r.Raw)
			Expect(r.v0Error()).To(Equal("Agent not found"))
		}

		// Scopes and roles: read for the history, write for sync and reset; the agent's own
		// gateway token opens its routes.
		viewer := token(ws, "vic", "", auth.ScopeAll)
		Expect(call("GET", "/v0/agents/"+id+"/snapshots", viewer, nil).Status).To(Equal(200))
		Expect(call("POST", "/v0/agents/"+id+"/snapshots/sync", viewer, nil).Status).To(Equal(403))
		readOnly := token(ws, "ann", "", auth.ScopeAgentsRead)
		Expect(call("GET", "/v0/agents/"+id+"/snapshots", readOnly, nil).Status).To(Equal(200))
		Expect(call("POST", "/v0/agents/"+id+"/snapshots/sync", readOnly, nil).Status).To(Equal(403))
		Expect(call("GET", "/v0/agents/"+id+"/snapshots", token(ws, "ann", "", auth.ScopeFilesRead), nil).Status).To(Equal(403))
		gw := call("GET", "/v0/agents/"+id+"/gateway-token", tok, nil).Body["token"].(string)
		Expect(call("POST", "/v0/agents/"+id+"/snapshots/sync", gw, nil).Status).To(Equal(201))
		Expect(call("GET", "/v0/agents/"+other+"/snapshots", gw, nil).Status).To(Equal(404))

		// Storing failing for good, and archiving failing: 500 Sync failed, nothing left behind.
		mainFiles.broken.Store(true)
		r = call("POST", "/v0/agents/"+id+"/snapshots/sync", tok, nil)
		mainFiles.broken.Store(false)
		Expect(r.Status).To(Equal(500), r.Raw)
		Expect(r.v0Error()).To(Equal("Sync failed"))
		broken := snapAgent(baseURL, tok, "No workspace")
		execOK(baseURL, tok, broken, `rm -rf "$PWD"`)
		r = call("POST", "/v0/agents/"+broken+"/snapshots/sync", tok, nil)
		Expect(r.Status).To(Equal(500), r.Raw)
		Expect(r.v0Error()).To(Equal("Sync failed"))
		var snaps agentsv1.SnapshotList
		Eventually(func() int {
			Expect(k8sClient.List(ctx, &snaps, client.InNamespace(ws))).To(Succeed())
			n := 0
			for _, s := range snaps.Items {
				if s.Status.Phase == agentsv1.SnapshotFailed {
					n++
				}
			}
			return n
		}).Should(BeZero())
	})

	It("answers 400 Storage not configured on a facade without storage", func() {
		id := snapAgent(baseURL, tok, "No storage")
		bare := httptest.NewServer(facade.New(facade.Options{
			Deps: ops.Deps{Client: k8sClient, APIReader: k8sClient}, Signer: plat.Signer, Log: logf.Log,
		}))
		defer bare.Close()
		r := callURL(bare.URL, "POST", "/v0/agents/"+id+"/snapshots/sync", tok, nil)
		Expect(r.Status).To(Equal(400), r.Raw)
		Expect(r.v0Error()).To(Equal("Storage not configured"))
	})

	It("answers 503 while storage is unreachable and recovers with the history intact", func() {
		id := snapAgent(baseURL, tok, "Outage")
		cid := syncOK(baseURL, tok, id)["cid"].(string)
		execOK(baseURL, tok, id, "printf during > outage.txt")

		end := mainFiles.outage()
		DeferCleanup(end)
		for _, r := range []reply{
			call("POST", "/v0/agents/"+id+"/snapshots/sync", tok, nil),
			call("GET", "/v0/agents/"+id+"/snapshots", tok, nil),
			call("POST", "/v0/agents/"+id+"/snapshots/reset", tok, map[string]string{"snapshotCid": cid}),
		} {
			Expect(r.Status).To(Equal(503), r.Raw)
		}
		// A kubectl Snapshot waits for the backend.
		snap := &agentsv1.Snapshot{
			ObjectMeta: metav1.ObjectMeta{Namespace: ws, GenerateName: "outage-"},
			Spec:       agentsv1.SnapshotSpec{AgentRef: agentsv1.LocalObjectReference{Name: id}},
		}
		Expect(k8sClient.Create(ctx, snap)).To(Succeed())
		Eventually(func() string {
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(snap), snap)).To(Succeed())
			if c := meta.FindStatusCondition(snap.Status.Conditions, agentsv1.ConditionReady); c != nil {
				return c.Reason
			}
			return ""
		}).Should(Equal(agentsv1.ReasonStorageUnavailable))

		end()
		Eventually(func() agentsv1.SnapshotPhase {
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(snap), snap)).To(Succeed())
			return snap.Status.Phase
		}).Should(Equal(agentsv1.SnapshotCompleted))
		Expect(snap.Status.CID).NotTo(Equal(cid))
		Expect(historyCIDs(baseURL, tok, id)).To(Equal([]string{snap.Status.CID, cid}))
		resetOK(baseURL, tok, id, cid)
		Expect(execOK(baseURL, tok, id, "ls")).NotTo(ContainSubstring("outage.txt"))
	})
})
