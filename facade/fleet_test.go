package facade_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/rules/auth"
)

// fleetEvent is one server-sent event of GET /v0/fleet/stream.
type fleetEvent struct {
	Name string
	Data map[string]any
	Raw  string
}

// fleetStream is a followed fleet: its events as read.
type fleetStream struct {
	mu     sync.Mutex
	events []fleetEvent
	ended  chan struct{} // closed when the facade ends the stream (or ctx does)
}

func (s *fleetStream) all() []fleetEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]fleetEvent(nil), s.events...)
}

// followFleet opens GET /v0/fleet/stream and reads its events until ctx ends.
func followFleet(ctx context.Context, tok string) *fleetStream {
	GinkgoHelper()
	req, err := http.NewRequestWithContext(ctx, "GET", baseURL+"/v0/fleet/stream", nil)
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	Expect(resp.StatusCode).To(Equal(200))
	Expect(resp.Header.Get("Content-Type")).To(Equal("text/event-stream"))
	s := &fleetStream{ended: make(chan struct{})}
	go func() {
		defer close(s.ended)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		var name string
		for sc.Scan() {
			line := sc.Text()
			if v, ok := strings.CutPrefix(line, "event: "); ok {
				name = v
			} else if v, ok := strings.CutPrefix(line, "data: "); ok {
				ev := fleetEvent{Name: name, Raw: v}
				_ = json.Unmarshal([]byte(v), &ev.Data)
				s.mu.Lock()
				s.events = append(s.events, ev)
				s.mu.Unlock()
			}
		}
	}()
	return s
}

// fleetRow is the agent's row in a fleet answer or event (nil: absent).
func fleetRow(data map[string]any, id string) map[string]any {
	rows, _ := data["agents"].([]any)
	for _, r := range rows {
		if row, _ := r.(map[string]any); row["id"] == id {
			return row
		}
	}
	return nil
}

var _ = Describe("Fleet", Ordered, func() {
	const ws, other = "fleet-a", "fleet-b"
	var tok, reader, otherTok, agent, otherAgent string

	BeforeAll(func() {
		workspace(ws, agentsv1.PlanPro, agentsv1.WorkspaceMember{UserID: "fay", Role: agentsv1.RoleOwner},
			agentsv1.WorkspaceMember{UserID: "val", Role: agentsv1.RoleViewer})
		workspace(other, agentsv1.PlanPro, agentsv1.WorkspaceMember{UserID: "oz", Role: agentsv1.RoleOwner})
		tok = token(ws, "fay", agentsv1.RoleOwner, auth.ScopeAgentsRead, auth.ScopeAgentsWrite)
		reader = token(ws, "val", agentsv1.RoleViewer, auth.ScopeAgentsRead)
		otherTok = token(other, "oz", agentsv1.RoleOwner, auth.ScopeAgentsRead, auth.ScopeAgentsWrite)
		agent = newAgentIn(tok, "fleet-one")
		otherAgent = newAgentIn(otherTok, "fleet-other")
	})

	It("is authenticated and scoped to the caller's workspace like the agent list", func() {
		for _, path := range []string{"/v0/fleet", "/v0/fleet/stream"} {
			r := call("GET", path, "", nil)
			Expect(r.Status).To(Equal(401), path)
			Expect(r.v0Error()).To(Equal(call("GET", "/v0/agents", "", nil).v0Error()))
			r = call("GET", path, token(ws, "fay", agentsv1.RoleOwner, auth.ScopeFilesRead), nil)
			Expect(r.Status).To(Equal(403), path)
			Expect(r.v0Error()).To(Equal("Missing scope " + auth.ScopeAgentsRead))
		}
		// An agent's own gateway token sees one agent: the fleet is not its to read.
		gw := call("GET", "/v0/agents/"+agent+"/gateway-token", tok, nil)
		Expect(gw.Status).To(Equal(200), gw.Raw)
		gwTok := gw.Body["token"].(string)
		Expect(call("GET", "/v0/fleet", gwTok, nil).Status).To(Equal(403))

		r := call("GET", "/v0/fleet", reader, nil)
		Expect(r.Status).To(Equal(200), r.Raw)
		Expect(fleetRow(r.Body, agent)).NotTo(BeNil())
		Expect(fleetRow(r.Body, otherAgent)).To(BeNil(), "another workspace's agent")
		Expect(r.Body["workspace"].(map[string]any)["name"]).To(Equal(ws))
		Expect(r.Raw).NotTo(ContainSubstring(gwTok), "no secret in the payload")
		Expect(fleetRow(call("GET", "/v0/fleet", otherTok, nil).Body, agent)).To(BeNil())
	})

	It("shows today's model usage against the agent's and the workspace's budgets", func() {
		key := client.ObjectKey{Namespace: ws, Name: agent}
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			a := &agentsv1.Agent{}
			if err := k8sClient.Get(ctx, key, a); err != nil {
				return err
			}
			a.Spec.Budget = &agentsv1.ModelBudget{TokensPerDay: 1000}
			return k8sClient.Update(ctx, a)
		})).To(Succeed())
		// As the model proxy's usage recorder writes it.
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			a := &agentsv1.Agent{}
			if err := k8sClient.Get(ctx, key, a); err != nil {
				return err
			}
			now := metav1.Now()
			a.Status.Usage = &agentsv1.ModelUsage{Day: now.UTC().Format(time.DateOnly), Requests: 3, InputTokens: 200, OutputTokens: 50, UpdatedAt: &now}
			return k8sClient.Status().Update(ctx, a)
		})).To(Succeed())
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			w := &agentsv1.Workspace{}
			if err := k8sClient.Get(ctx, client.ObjectKey{Name: ws}, w); err != nil {
				return err
			}
			w.Spec.Budget = &agentsv1.ModelBudget{TokensPerDay: 5000}
			return k8sClient.Update(ctx, w)
		})).To(Succeed())

		Eventually(func(g Gomega) {
			r := call("GET", "/v0/fleet", reader, nil)
			g.Expect(r.Status).To(Equal(200), r.Raw)
			row := fleetRow(r.Body, agent)
			g.Expect(row).To(HaveKeyWithValue("tokensToday", BeNumerically("==", 250)))
			g.Expect(row).To(HaveKeyWithValue("requestsToday", BeNumerically("==", 3)))
			g.Expect(row).To(HaveKeyWithValue("tokensPerDay", BeNumerically("==", 1000)))
			g.Expect(row).To(HaveKeyWithValue("tokensLeft", BeNumerically("==", 750)))
			g.Expect(r.Body["workspace"]).To(HaveKeyWithValue("tokensLeft", BeNumerically("==", 5000)))
		}).Should(Succeed())
	})

	It("counts the agent's Warning events of the last hour as its errors", func() {
		errorsOf := func() float64 {
			r := call("GET", "/v0/fleet", reader, nil)
			Expect(r.Status).To(Equal(200), r.Raw)
			n, ok := fleetRow(r.Body, agent)["errorsLastHour"].(float64)
			Expect(ok).To(BeTrue(), r.Raw)
			return n
		}
		base := errorsOf()
		a := &agentsv1.Agent{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ws, Name: agent}, a)).To(Succeed())
		now := time.Now()
		event := func(name, typ string, at time.Time, series int32) *eventsv1.Event {
			e := &eventsv1.Event{
				ObjectMeta: metav1.ObjectMeta{Namespace: ws, Name: name},
				Regarding: corev1.ObjectReference{APIVersion: agentsv1.GroupVersion.String(), Kind: agentsv1.KindAgent,
					Namespace: ws, Name: agent, UID: a.UID},
				Type: typ, Reason: agentsv1.EventGatewayCrashed, Action: "Reconcile", Note: "test",
				EventTime: metav1.NewMicroTime(at), ReportingController: "agentplane.io/test", ReportingInstance: "test",
			}
			if series > 0 {
				e.Series = &eventsv1.EventSeries{Count: series, LastObservedTime: metav1.NewMicroTime(at.Add(time.Second))}
			}
			return e
		}
		for _, e := range []*eventsv1.Event{
			event("fleet-crash-now", corev1.EventTypeWarning, now, 0),
			event("fleet-crash-series", corev1.EventTypeWarning, now.Add(-10*time.Minute), 2),
			event("fleet-crash-old", corev1.EventTypeWarning, now.Add(-2*time.Hour), 0),
			event("fleet-normal", corev1.EventTypeNormal, now, 0),
		} {
			Expect(k8sClient.Create(ctx, e)).To(Succeed())
		}
		// Counted again at the next reading of a new request: kube-apiserver's own field
		// selector (type=Warning) picks the warnings.
		Eventually(errorsOf).Should(Equal(base + 3))
	})

	It("ends a stream whose token is revoked meanwhile", func() {
		sctx, stop := context.WithCancel(ctx)
		defer stop()
		// A stream of a valid token, opened first: it has been checked at least as often as
		// the revoked one when that one ends, and must still be open.
		kept := followFleet(sctx, reader)
		Eventually(func() []fleetEvent { return kept.all() }).ShouldNot(BeEmpty())
		tok := token(ws, "val", agentsv1.RoleViewer, auth.ScopeAgentsRead)
		s := followFleet(sctx, tok)
		Eventually(func() []fleetEvent { return s.all() }).ShouldNot(BeEmpty())
		claims, err := plat.Signer.Parse(tok)
		Expect(err).NotTo(HaveOccurred())
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			key := &agentsv1.ApiKey{}
			if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ws, Name: claims.ID}, key); err != nil {
				return err
			}
			key.Spec.Revoked = true
			return k8sClient.Update(ctx, key)
		})).To(Succeed())
		Eventually(s.ended).Should(BeClosed())
		Expect(kept.ended).NotTo(BeClosed(), "a valid token's stream ended too")
	})

	It("streams a snapshot, then only the agents that changed: a suspended agent becomes asleep", func() {
		sctx, stop := context.WithCancel(ctx)
		defer stop()
		quiet := newAgentIn(tok, "fleet-quiet")
		s := followFleet(sctx, reader)
		Eventually(func() []fleetEvent { return s.all() }).ShouldNot(BeEmpty())
		first := s.all()[0]
		Expect(first.Name).To(Equal("snapshot"))
		Expect(fleetRow(first.Data, agent)).To(HaveKeyWithValue("phase", "running"))
		Expect(fleetRow(first.Data, quiet)).NotTo(BeNil())
		Expect(fleetRow(first.Data, otherAgent)).To(BeNil())

		Expect(call("POST", "/v0/agents/"+agent+"/suspend", tok, nil).Status).To(Equal(200))
		var update fleetEvent
		Eventually(func(g Gomega) {
			for _, ev := range s.all()[1:] {
				if row := fleetRow(ev.Data, agent); ev.Name == "update" && row["phase"] == "suspended" {
					g.Expect(row["asleep"]).To(BeTrue())
					update = ev
					return
				}
			}
			g.Expect("no update").To(BeEmpty())
		}).Should(Succeed())
		// An update carries the rows that changed, not the fleet.
		Expect(fleetRow(update.Data, quiet)).To(BeNil())
		Expect(update.Data["workspace"]).To(HaveKeyWithValue("name", ws))

		Expect(call("DELETE", "/v0/agents/"+quiet, tok, nil).Status).To(BeNumerically("<", 300))
		Eventually(func() bool {
			for _, ev := range s.all() {
				if removed, _ := ev.Data["removed"].([]any); len(removed) > 0 && removed[0] == quiet {
					return true
				}
			}
			return false
		}).Should(BeTrue())
	})
})
