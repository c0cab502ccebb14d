package stress

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// objectParams are the route parameters (and body members) that name an object of a
// workspace; the others (network, channel, slug) name no tenant's object.
var objectParams = []string{"agentId", "secretId", "domainId", "skillId", "id", "cid", "snapshotCid", "skillCid", "conversationId"}

// TestWorkspaceIsolation calls every registered route with a token of workspace A (and with
// the gateway token of A's agent) naming workspace B's objects: B's agent, secret, domain,
// skill, snapshot, file and issue, in the path or in the body, also through A's own agent.
// No call may succeed or fail on the server, no answer may mention B's objects, and B's
// objects must be exactly as before.
func TestWorkspaceIsolation(t *testing.T) {
	wsA, wsB := "iso-a", "iso-b"
	internal := func(s *agentsv1.WorkspaceSpec) { s.Internal = true }
	workspace(t, wsA, agentsv1.PlanPro, internal)
	workspace(t, wsB, agentsv1.PlanPro, internal)
	tokA, tokB := token(t, wsA), token(t, wsB)
	b := populate(t, wsB, tokB)
	a := populate(t, wsA, tokA)
	b["slug"] = "iso-public" // a registry name, not B's: installing it in A is A's business
	publish(b["slug"], "1.0.0")
	gwA := remember("gateway token", fmt.Sprint(expect(t, call(mainURL, "GET", "/v0/agents/"+a["agentId"]+"/gateway-token", tokA, nil), 200, "gateway token").Body["token"]))
	var marks []string // what no answer to A may contain
	for _, p := range objectParams {
		if p != "skillCid" && b[p] != "" { // skill bundles are registry content, the same for everyone
			marks = append(marks, b[p])
		}
	}
	marks = append(marks, b["issueId"], wsB+"-site")

	before := settledSnapshot(t, wsB)
	calls := 0
	for _, r := range plat.API.Routes() {
		params := pathParams(r)
		refs := slices.ContainsFunc(params, func(p string) bool { return slices.Contains(objectParams, p) }) ||
			len(bodyRefs[r.Method+" "+r.Path]) > 0
		type variant struct {
			name, base, tok string
			id              ids
		}
		vs := []variant{{"A's token", mainURL, tokA, b}, {"A's token", replicaURL, tokA, b}}
		otherRefs := slices.ContainsFunc(params, func(p string) bool { return p != "agentId" && slices.Contains(objectParams, p) }) ||
			len(bodyRefs[r.Method+" "+r.Path]) > 0
		if slices.Contains(params, "agentId") && otherRefs {
			mixed := maps.Clone(b)
			mixed["agentId"] = a["agentId"]
			vs = append(vs, variant{"A's token on A's agent", mainURL, tokA, mixed})
		}
		if r.Gateway && slices.Contains(params, "agentId") {
			vs = append(vs, variant{"A's gateway token", replicaURL, gwA, b})
		}
		for _, v := range vs {
			c := callFor(t, r, v.id)
			got := call(v.base, c.method, c.path, v.tok, c.body)
			calls++
			switch {
			case got.Err != nil || got.Status >= 500:
				t.Errorf("%s, %s: %s", v.name, c, got)
			case refs && got.Status < 400:
				t.Errorf("%s, %s naming B's objects succeeded: %s", v.name, c, got)
			}
			for _, m := range marks {
				if strings.Contains(got.Raw, m) {
					t.Errorf("%s, %s: the answer mentions B's %s: %s", v.name, c, m, got)
				}
			}
		}
	}
	t.Logf("%d calls on %d routes", calls, len(plat.API.Routes()))
	if after := snapshotOf(t, wsB); !maps.Equal(before, after) {
		for k, v := range after {
			if before[k] != v {
				t.Errorf("B's %s changed:\nbefore: %s\nafter:  %s", k, before[k], v)
			}
		}
		for k := range before {
			if _, ok := after[k]; !ok {
				t.Errorf("B's %s is gone", k)
			}
		}
	}
}

// settledSnapshot is snapshotOf(ns) once the controllers are done with the workspace: every
// object of it has observed its generation, it holds no agent slot in flight (a pending slot
// settles once the workspace is quiet), and no controller has work queued or in hand.
func settledSnapshot(t *testing.T, ns string) map[string]string {
	t.Helper()
	var snap map[string]string
	err := eventually(60*time.Second, 100*time.Millisecond, func() error {
		if !slotsSettled(t, ns) {
			return fmt.Errorf("workspace %s holds agent slots in flight", ns)
		}
		if busy := busyControllers(t); len(busy) > 0 {
			return fmt.Errorf("controllers at work: %v", busy)
		}
		snap = snapshotOf(t, ns)
		for k, v := range snap {
			var o struct {
				Metadata struct{ Generation int64 }
				Status   *struct{ ObservedGeneration *int64 }
			}
			if json.Unmarshal([]byte(v), &o) == nil && o.Status != nil && o.Status.ObservedGeneration != nil &&
				*o.Status.ObservedGeneration != o.Metadata.Generation {
				return fmt.Errorf("%s observed generation %d of %d", k, *o.Status.ObservedGeneration, o.Metadata.Generation)
			}
		}
		if busy := busyControllers(t); len(busy) > 0 {
			return fmt.Errorf("controllers at work: %v", busy)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("workspace %s does not settle: %v", ns, err)
	}
	return snap
}

// busyControllers names the controllers with requests queued or being reconciled
// (controller-runtime's workqueue_depth and controller_runtime_active_workers).
func busyControllers(t *testing.T) []string {
	t.Helper()
	var busy []string
	for name, label := range map[string]string{"workqueue_depth": "name", "controller_runtime_active_workers": "controller"} {
		for c, v := range metricByLabel(t, name, label) {
			if v > 0 {
				busy = append(busy, name+"{"+c+"}")
			}
		}
	}
	return busy
}

// slotsSettled tells whether workspace ns holds no pending or releasing agent slot.
func slotsSettled(t *testing.T, ns string) bool {
	t.Helper()
	ws := &agentsv1.Workspace{}
	if err := k8s.Get(bg(), client.ObjectKey{Name: ns}, ws); err != nil {
		t.Fatal(err)
	}
	return len(ws.Status.AgentSlots.Pending) == 0 && len(ws.Status.AgentSlots.Releasing) == 0
}

// snapshotOf is every object of workspace ns by kind and name, as JSON without
// resourceVersion and managedFields: every agentplane object in its namespace, the Workspace
// itself, ConfigMaps, and core Secrets (a hash of their data).
func snapshotOf(t *testing.T, ns string) map[string]string {
	t.Helper()
	out := map[string]string{}
	add := func(kind string, o *unstructured.Unstructured) {
		unstructured.RemoveNestedField(o.Object, "metadata", "resourceVersion")
		unstructured.RemoveNestedField(o.Object, "metadata", "managedFields")
		b, _ := json.Marshal(o.Object)
		out[kind+" "+o.GetName()] = string(b)
	}
	for _, gvk := range agentplaneKinds() {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(gvk)
		opts := []client.ListOption{client.InNamespace(ns)}
		if gvk.Kind == "WorkspaceList" {
			opts = nil
		}
		if err := k8s.List(bg(), l, opts...); err != nil {
			t.Fatal(err)
		}
		for i := range l.Items {
			if gvk.Kind != "WorkspaceList" || l.Items[i].GetName() == ns {
				add(strings.TrimSuffix(gvk.Kind, "List"), &l.Items[i])
			}
		}
	}
	var cms corev1.ConfigMapList
	if err := k8s.List(bg(), &cms, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, cm := range cms.Items {
		b, _ := json.Marshal(map[string]any{"data": cm.Data, "labels": cm.Labels})
		out["ConfigMap "+cm.Name] = string(b)
	}
	var secrets corev1.SecretList
	if err := k8s.List(bg(), &secrets, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets.Items {
		b, _ := json.Marshal(s.Data)
		sum := sha256.Sum256(b)
		out["Secret "+s.Name] = hex.EncodeToString(sum[:])
	}
	return out
}
