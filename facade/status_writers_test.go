package facade_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/facade"
	"github.com/agentplane/agentplane/internal/ops"
)

// statusWrites records (and refuses) every write of a status subresource by a client.
type statusWrites struct {
	mu  sync.Mutex
	got []string
}

func (w *statusWrites) refuse(obj client.Object, sub string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	what := fmt.Sprintf("%T %s/%s %s", obj, obj.GetNamespace(), obj.GetName(), sub)
	w.got = append(w.got, what)
	return fmt.Errorf("test: the facade wrote a status subresource: %s", what)
}

func (w *statusWrites) list() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.got...)
}

// noWatch makes a client.Client a client.WithWatch for the interceptor (the facade does not
// watch through its client).
type noWatch struct{ client.Client }

func (noWatch) Watch(context.Context, client.ObjectList, ...client.ListOption) (watch.Interface, error) {
	return nil, errors.New("test: no watch")
}

// One writer per status: the facade changes specs and metadata, the controllers alone write
// status. A facade whose client refuses every status write still resets snapshots, attaches
// and detaches secrets, deletes them and installs skills.
var _ = Describe("Status writers", Ordered, func() {
	const ws = "status-writers"
	var (
		tok    string
		bare   *httptest.Server
		writes = &statusWrites{}
	)

	BeforeAll(func() {
		tok = snapshotWorkspace(ws)
		mgr := plat.Manager
		c := interceptor.NewClient(noWatch{mgr.GetClient()}, interceptor.Funcs{
			SubResourceUpdate: func(_ context.Context, _ client.Client, sub string, obj client.Object, _ ...client.SubResourceUpdateOption) error {
				return writes.refuse(obj, sub)
			},
			SubResourcePatch: func(_ context.Context, _ client.Client, sub string, obj client.Object, _ client.Patch, _ ...client.SubResourcePatchOption) error {
				return writes.refuse(obj, sub)
			},
		})
		bare = httptest.NewServer(facade.New(facade.Options{
			Deps: ops.Deps{
				Client: c, APIReader: mgr.GetAPIReader(), Informers: mgr.GetCache(), Files: mainFiles, ClawHubURL: hubURL(),
			},
			Signer: plat.Signer, Log: logf.Log,
		}))
		DeferCleanup(bare.Close)
	})
	AfterEach(func() { Expect(writes.list()).To(BeEmpty()) })

	It("resets a snapshot (twice to the same CID: restored twice)", func() {
		id := snapAgent(baseURL, tok, "Reset writer")
		cid := syncOK(baseURL, tok, id)["cid"].(string)
		agent := &agentsv1.Agent{}
		key := client.ObjectKey{Namespace: ws, Name: id}
		resetOK(bare.URL, tok, id, cid)
		Expect(k8sClient.Get(ctx, key, agent)).To(Succeed())
		first := agent.Status.LastRestoreAt
		Expect(first).NotTo(BeNil())
		Expect(agent.Status.SnapshotCID).To(Equal(cid))
		resetOK(bare.URL, tok, id, cid)
		Expect(k8sClient.Get(ctx, key, agent)).To(Succeed())
		Expect(agent.Status.LastRestoreAt.After(first.Time)).To(BeTrue(), "the second reset restored again")
	})

	It("attaches, detaches and deletes a secret; status.attachedTo follows the agent's spec", func() {
		id := snapAgent(baseURL, tok, "Secret writer")
		r := call("POST", "/v0/secrets", tok, map[string]string{"name": "WRITER_KEY", "value": "value-of-writer-key"})
		Expect(r.Status).To(Equal(201), r.Raw)
		sid := secretID(r)
		attachedTo := func() []string {
			s := &agentsv1.AgentSecret{}
			Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ws, Name: sid}, s)).To(Succeed())
			return s.Status.AttachedTo
		}

		r = callURL(bare.URL, "POST", "/v0/agents/"+id+"/secrets", tok, map[string]any{"secretIds": []string{sid}})
		Expect(r.Status).To(Equal(200), r.Raw)
		Eventually(attachedTo).Should(Equal([]string{id}))
		r = callURL(bare.URL, "DELETE", "/v0/secrets/"+sid, tok, nil)
		Expect(r.Status).To(Equal(409), r.Raw)
		Expect(r.v0Error()).To(Equal("Secret is attached to an agent"))

		r = callURL(bare.URL, "DELETE", "/v0/agents/"+id+"/secrets/"+sid, tok, nil)
		Expect(r.Status).To(Equal(200), r.Raw)
		Eventually(attachedTo).Should(BeEmpty())
		r = callURL(bare.URL, "DELETE", "/v0/secrets/"+sid, tok, nil)
		Expect(r.Status).To(Equal(200), r.Raw)
	})

	It("installs a skill and moves it to a new version; the Skill controller records its status", func() {
		v1 := publish("writer-skill", "1.0.0")
		r := installAt(bare.URL, tok, "writer-skill", nil)
		Expect(r.Status).To(Equal(201), r.Raw)
		Expect(skillOf(r)).To(HaveKeyWithValue("size", BeEquivalentTo(len(v1))))
		v2 := publish("writer-skill", "1.1.0")
		r = installAt(bare.URL, tok, "writer-skill", nil)
		Expect(r.Status).To(Equal(200), r.Raw)
		Expect(skillOf(r)).To(HaveKeyWithValue("size", BeEquivalentTo(len(v2))))
		Eventually(func() int64 {
			sk := &agentsv1.Skill{}
			Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ws, Name: "writer-skill"}, sk)).To(Succeed())
			return sk.Status.Size
		}).Should(BeEquivalentTo(len(v2)))
	})
})
