package stress

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// TestNoSecretsLeak handles secrets, a channel token, gateway tokens (rotated twice) and JWTs
// (bearer tokens and a platform token), provokes errors with them, and then scans the
// platform's log, every Kubernetes Event (core/v1 and events.k8s.io/v1), every agentplane
// object and core ConfigMap (as JSON) and every error body any test received: none may hold
// any sensitive value any test handled.
func TestNoSecretsLeak(t *testing.T) {
	const ws = "leaks"
	workspace(t, ws, agentsv1.PlanPro)
	tok := token(t, ws)
	agent := newAgent(t, mainURL, tok, "keeper")
	base := "/v0/agents/" + agent

	val := remember("secret value", "sk-leak-test-"+stamp())
	r := expect(t, call(mainURL, "POST", "/v0/secrets", tok, map[string]any{"name": "LEAK_KEY", "value": val, "provider": "openai"}), 201, "create secret")
	expect(t, call(replicaURL, "POST", base+"/secrets", tok, map[string]any{"secretIds": []string{r.obj("secret")["id"].(string)}}), 200, "attach secret")
	// Errors that carry the value in their request.
	expect(t, call(mainURL, "POST", "/v0/secrets", tok, map[string]any{"name": "LEAK_KEY", "value": remember("secret value", "sk-dup-"+stamp())}), 409, "duplicate")
	expect(t, call(mainURL, "POST", "/v0/secrets", tok, map[string]any{"name": " ", "value": remember("secret value", "sk-noname-"+stamp())}), 400, "no name")
	expect(t, call(mainURL, "POST", "/v0/secrets", tok, map[string]any{"name": "BAD", "value": remember("secret value", "sk-badenv-"+stamp()), "envName": "1bad"}), 400, "bad env name")

	bot := remember("telegram bot token", "987654321:leak-bot-"+stamp())
	expect(t, call(mainURL, "POST", base+"/channels/telegram", tok, map[string]any{"botToken": bot}), 201, "set up telegram")
	bad := remember("telegram bot token", "987654321:leak-bad-"+stamp())
	expect(t, call(mainURL, "POST", base+"/channels/telegram", tok, map[string]any{"botToken": bad + "\n"}), 400, "malformed bot token")

	gw := remember("gateway token", fmt.Sprint(expect(t, call(mainURL, "GET", base+"/gateway-token", tok, nil), 200, "gateway token").Body["token"]))
	for range 2 {
		rot := expect(t, call(replicaURL, "POST", base+"/gateway-token/rotate", tok, nil), 200, "rotate")
		next := remember("gateway token", fmt.Sprint(rot.Body["token"]))
		expect(t, call(replicaURL, "GET", base, gw, nil), 401, "old gateway token")
		// Another replica accepts the new token once its cache has it (gateway tokens are
		// resolved from the cache alone, so that a forged one costs the API server nothing).
		if err := eventually(5*time.Second, 20*time.Millisecond, func() error {
			if r := call(mainURL, "GET", base, next, nil); r.Status != 200 {
				return fmt.Errorf("new gateway token on the other replica: %s", r)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		gw = next
	}
	pt := expect(t, call(mainURL, "POST", base+"/platform/token", gw, nil), 201, "platform token").Body["token"].(string)
	rememberJWT("platform JWT", pt)
	expect(t, call(mainURL, "GET", base, pt, nil), 200, "platform token use")
	expect(t, call(mainURL, "GET", "/v0/agents", pt, nil), 403, "platform token on a workspace-wide route")
	expect(t, call(mainURL, "GET", "/v0/agents/"+agent+"-nope", pt, nil), 404, "platform token, missing agent")
	expect(t, call(mainURL, "GET", "/v0/agents", pt[:len(pt)-2]+"xx", nil), 401, "tampered JWT")
	expect(t, call(mainURL, "GET", base+"/config", gw+"x", nil), 401, "wrong gateway token")
	expect(t, call(mainURL, "GET", base, tok, nil), 200, "agent settles")

	sources := map[string]string{"the platform's log": logs.String()}
	received.Lock()
	sources["error bodies"] = strings.Join(received.errorBodies, "\n")
	received.Unlock()
	var core corev1.EventList
	var modern eventsv1.EventList
	var cms corev1.ConfigMapList
	for name, list := range map[string]client.ObjectList{"core/v1 Events": &core, "events.k8s.io/v1 Events": &modern, "ConfigMaps": &cms} {
		sources[name] = listJSON(t, list)
	}
	for _, gvk := range agentplaneKinds() {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(gvk)
		sources[gvk.Kind] = listJSON(t, l)
	}

	// The scan can find what is there: the agent's id is in every source that describes it.
	for _, name := range []string{"the platform's log", "AgentList", "events.k8s.io/v1 Events"} {
		if !strings.Contains(sources[name], agent) {
			t.Fatalf("%s does not even name agent %s: the scan would prove nothing", name, agent)
		}
	}
	sensitive.Lock()
	values := make([]string, 0, len(sensitive.values))
	for v := range sensitive.values {
		values = append(values, v)
	}
	sensitive.Unlock()
	sort.Strings(values)
	t.Logf("scanning %d sources (%d bytes of log) for %d sensitive values", len(sources), len(sources["the platform's log"]), len(values))
	for name, text := range sources {
		for _, v := range values {
			if i := strings.Index(text, v); i >= 0 {
				t.Errorf("%s holds a %s: …%s…", name, sensitive.values[v], text[max(0, i-80):min(len(text), i+len(v)+20)])
			}
		}
	}
}

// listJSON lists every object of l's kind (all namespaces) and returns them as JSON.
func listJSON(t *testing.T, l client.ObjectList) string {
	t.Helper()
	if err := k8s.List(bg(), l); err != nil {
		t.Fatalf("list %T: %v", l, err)
	}
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// agentplaneKinds are the list kinds of every agentplane.io type.
func agentplaneKinds() []schema.GroupVersionKind {
	var out []schema.GroupVersionKind
	for gvk := range env.Scheme.AllKnownTypes() {
		if gvk.Group == agentsv1.GroupVersion.Group && strings.HasSuffix(gvk.Kind, "List") {
			out = append(out, gvk)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Kind < out[j].Kind })
	return out
}
