package stress

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/cid"
	"github.com/agentplane/agentplane/internal/adapters/clawhub/clawhubtest"
	"github.com/agentplane/agentplane/internal/devtools/testenv"
	"github.com/agentplane/agentplane/internal/rules/auth"
	"github.com/agentplane/agentplane/internal/rules/workspacens"
)

// Deadlines of the helpers. Every wait in this package has one.
const (
	// callTimeout bounds one HTTP request (agent create and restart wait up to
	// provisionTimeout for the gateway).
	callTimeout = provisionTimeout + 30*time.Second
	// settleTimeout bounds waits for controllers to converge.
	settleTimeout = 60 * time.Second
)

// reply is a decoded HTTP answer; Err is set when no answer came (refused, timed out).
type reply struct {
	Status int
	Raw    string
	Body   map[string]any
	Err    error
	Took   time.Duration
}

// errorMsg is the `error` string of a /v0 error body.
func (r reply) errorMsg() string {
	s, _ := r.Body["error"].(string)
	return s
}

// obj is the member name of the body as an object (nil when absent).
func (r reply) obj(name string) map[string]any {
	m, _ := r.Body[name].(map[string]any)
	return m
}

func (r reply) String() string {
	if r.Err != nil {
		return fmt.Sprintf("no answer after %s: %v", r.Took.Round(time.Millisecond), r.Err)
	}
	return fmt.Sprintf("%d %s", r.Status, strings.TrimSpace(r.Raw))
}

// received keeps every error body any test received, for the leak scan.
var received struct {
	sync.Mutex
	errorBodies []string
}

// call sends a JSON request (body: nil, a string sent as is, or a value marshalled to JSON)
// with a bearer token to the facade at base, bounded by callTimeout.
func call(base, method, path, tok string, body any) reply {
	return callWithin(callTimeout, base, method, path, tok, body)
}

// callWithin is call bounded by timeout.
func callWithin(timeout time.Duration, base, method, path, tok string, body any) reply {
	return callWithID(timeout, base, method, path, tok, body, "")
}

// callWithID is callWithin with the request id the facade logs the request under (empty: the
// facade picks one).
func callWithID(timeout time.Duration, base, method, path, tok string, body any, requestID string) reply {
	var rd io.Reader
	contentType := "application/json"
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case rawBody:
		rd, contentType = bytes.NewReader(b.data), b.contentType
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			return reply{Err: err}
		}
		rd = bytes.NewReader(raw)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return reply{Err: err}
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if rd != nil {
		req.Header.Set("Content-Type", contentType)
	}
	if requestID != "" {
		req.Header.Set("X-Request-Id", requestID)
	}
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return reply{Err: err, Took: time.Since(start)}
	}
	defer resp.Body.Close()
	raw, err := testenv.ReadAnswer(resp)
	r := reply{Status: resp.StatusCode, Raw: string(raw), Err: err, Took: time.Since(start)}
	_ = json.Unmarshal(raw, &r.Body)
	if r.Status >= 300 {
		received.Lock()
		received.errorBodies = append(received.errorBodies, r.Raw)
		received.Unlock()
	}
	return r
}

// rawBody is a request body sent with its own content type (multipart uploads).
type rawBody struct {
	data        []byte
	contentType string
}

// expect fails t unless r has status want; it returns r for chaining.
func expect(t testing.TB, r reply, want int, what string) reply {
	t.Helper()
	if r.Err != nil || r.Status != want {
		t.Fatalf("%s: want %d, got %s", what, want, r)
	}
	return r
}

// race sends n requests at once (released together), spread over both facades: do gets the
// request's index and the facade to use. It returns the answers in index order.
func race(n int, do func(i int, base string) reply) []reply {
	out := make([]reply, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			out[i] = do(i, facades()[i%2])
		}()
	}
	close(start)
	wg.Wait()
	return out
}

// statuses counts answers by status (-1 for no answer).
func statuses(rs []reply) map[int]int {
	m := map[int]int{}
	for _, r := range rs {
		if r.Err != nil {
			m[-1]++
		} else {
			m[r.Status]++
		}
	}
	return m
}

// expectStatuses fails t unless the answers have exactly the statuses want and every answer
// with status s carries the error message msgs[s] (when given).
func expectStatuses(t testing.TB, rs []reply, want map[int]int, msgs map[int]string) {
	t.Helper()
	got := statuses(rs)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		var all []string
		for _, r := range rs {
			all = append(all, r.String())
		}
		t.Fatalf("statuses: want %v, got %v:\n%s", want, got, strings.Join(all, "\n"))
	}
	for _, r := range rs {
		if m, ok := msgs[r.Status]; ok && r.errorMsg() != m {
			t.Fatalf("status %d: want error %q, got %s", r.Status, m, r)
		}
	}
}

// eventually polls cond every interval until it holds or timeout passes; it returns the last
// error cond gave (nil when it held).
func eventually(timeout, interval time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(interval)
	}
}

// owner is the user owning every workspace the tests make.
const owner = "owner"

// workspace creates workspace name (and its namespace) owned by owner; edit adjusts the spec.
func workspace(t testing.TB, name string, plan agentsv1.Plan, edit ...func(*agentsv1.WorkspaceSpec)) {
	t.Helper()
	workspaceIn(t, k8s, name, plan, edit...)
}

// workspaceIn is workspace on the control plane of c.
func workspaceIn(t testing.TB, c client.Client, name string, plan agentsv1.Plan, edit ...func(*agentsv1.WorkspaceSpec)) {
	t.Helper()
	ws := &agentsv1.Workspace{Spec: agentsv1.WorkspaceSpec{
		Plan: plan, Members: []agentsv1.WorkspaceMember{{UserID: owner, Role: agentsv1.RoleOwner}},
	}}
	ws.Name = name
	for _, e := range edit {
		e(&ws.Spec)
	}
	if err := workspacens.EnsureWorkspace(bg(), c, ws); err != nil {
		t.Fatalf("workspace %s: %v", name, err)
	}
}

// sensitive collects every secret value, channel token, gateway token and JWT the tests
// handle, for the leak scan.
var sensitive struct {
	sync.Mutex
	values map[string]string // value -> what it is
}

// remember records a sensitive value.
func remember(what, value string) string {
	sensitive.Lock()
	defer sensitive.Unlock()
	if sensitive.values == nil {
		sensitive.values = map[string]string{}
	}
	if len(value) >= 12 { // long enough never to appear by chance
		sensitive.values[value] = what
	}
	return value
}

// token mints an owner token of ws with scopes (all when none).
func token(t testing.TB, ws string, scopes ...string) string {
	t.Helper()
	return tokenFrom(t, k8s, plat.Signer, ws, scopes...)
}

// tokenFrom is token on the control plane of c, signed by signer.
func tokenFrom(t testing.TB, c client.Client, signer *auth.Signer, ws string, scopes ...string) string {
	t.Helper()
	if len(scopes) == 0 {
		scopes = []string{auth.ScopeAll}
	}
	tok, _, err := auth.CreateKey(bg(), c, signer, auth.KeyRequest{Workspace: ws, UserID: owner, Scopes: scopes})
	if err != nil {
		t.Fatalf("token for %s: %v", ws, err)
	}
	rememberJWT("bearer JWT of "+ws, tok)
	return tok
}

// rememberJWT records a JWT and its signature (the part that makes it a credential).
func rememberJWT(what, jwt string) {
	remember(what, jwt)
	if i := strings.LastIndexByte(jwt, '.'); i > 0 && len(jwt)-i > 16 {
		remember(what+" (signature)", jwt[i+1:])
	}
}

// newAgent creates a running agent through the facade at base and returns its id.
func newAgent(t testing.TB, base, tok, name string) string {
	t.Helper()
	r := expect(t, call(base, "POST", "/v0/agents", tok, map[string]any{"name": name}), 201, "create agent "+name)
	return r.obj("agent")["id"].(string)
}

// agentObject reads an Agent from the API server.
func agentObject(t testing.TB, ns, id string) *agentsv1.Agent {
	t.Helper()
	a := &agentsv1.Agent{}
	if err := k8s.Get(bg(), client.ObjectKey{Namespace: ns, Name: id}, a); err != nil {
		t.Fatalf("get agent %s/%s: %v", ns, id, err)
	}
	return a
}

// bg is a context for API calls of the tests, bounded by settleTimeout.
func bg() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	_ = cancel // released when the deadline passes; calls are short
	return ctx
}

// publish publishes slug@version on the test registry and returns the bundle's CID.
func publish(slug, version string) string {
	dir := slug + "-" + version + "/"
	z := clawhubtest.Files(dir+"SKILL.md", clawhubtest.SkillMD(slug, "version "+version), dir+"notes/version.txt", version)
	hub.Add(slug, "Skill "+slug, version, z)
	c, _, err := cid.Compute(bytes.NewReader(z))
	if err != nil {
		panic(err)
	}
	return c.String()
}

// keyOf is the object key of name in namespace ns ("" for cluster-scoped objects).
func keyOf(ns, name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }

// slotsMatchAgents checks that workspace w's agent slots account for its agents exactly: each
// agent holds a slot once (bound, or still pending), no pending slot is without an agent, and
// the count of used slots is the number of bound agents not pending.
func slotsMatchAgents(w *agentsv1.Workspace, agents []agentsv1.Agent) error {
	s := w.Status.AgentSlots
	pending := map[string]bool{}
	for _, r := range s.Pending {
		pending[r.Name] = true
	}
	var problems []string
	used := 0
	for _, a := range agents {
		switch {
		case pending[a.Name]:
			delete(pending, a.Name)
		case a.Status.HoldsSlot:
			used++
		default:
			problems = append(problems, fmt.Sprintf("agent %s holds no slot", a.Name))
		}
	}
	for name := range pending {
		problems = append(problems, fmt.Sprintf("a slot is pending for %s, which does not exist", name))
	}
	if int(s.Used) != used {
		problems = append(problems, fmt.Sprintf("%d slots used for %d bound agents", s.Used, used))
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		return fmt.Errorf("workspace %s: %s", w.Name, strings.Join(problems, "; "))
	}
	return nil
}
