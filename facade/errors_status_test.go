package facade_test

import (
	"context"
	"fmt"
	"net"
	"net/http/httptest"
	"strings"
	"syscall"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/facade"
	agentruntime "github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/rules/auth"
)

// refused is what client-go returns when kube-apiserver does not answer.
func refused() error {
	return fmt.Errorf(`Get "https://127.0.0.1:6443/apis": %w`,
		&net.OpError{Op: "dial", Net: "tcp", Err: &net.AddrError{Err: syscall.ECONNREFUSED.Error()}})
}

// outage decides, per object and verb, whether kube-apiserver "fails" a call.
type outage func(obj client.Object, write bool) error

// failing wraps c so that every call fail refuses answers with its error; reads of callers'
// credentials (ApiKey, Workspace) always succeed, so authentication does.
func failing(c client.WithWatch, fail outage) client.WithWatch {
	check := func(obj client.Object, write bool) error {
		switch obj.(type) {
		case *agentsv1.ApiKey, *agentsv1.Workspace:
			if !write {
				return nil
			}
		}
		return fail(obj, write)
	}
	checkList := func(list client.ObjectList) error {
		switch list.(type) {
		case *agentsv1.ApiKeyList, *agentsv1.WorkspaceList:
			return nil
		}
		return fail(nil, false)
	}
	return interceptor.NewClient(c, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := check(obj, false); err != nil {
				return err
			}
			return c.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if err := checkList(list); err != nil {
				return err
			}
			return c.List(ctx, list, opts...)
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if err := check(obj, true); err != nil {
				return err
			}
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if err := check(obj, true); err != nil {
				return err
			}
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if err := check(obj, true); err != nil {
				return err
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			if err := check(obj, true); err != nil {
				return err
			}
			return c.Delete(ctx, obj, opts...)
		},
		DeleteAllOf: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteAllOfOption) error {
			if err := check(obj, true); err != nil {
				return err
			}
			return c.DeleteAllOf(ctx, obj, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			if err := check(obj, true); err != nil {
				return err
			}
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if err := check(obj, true); err != nil {
				return err
			}
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})
}

// unreachableRuntime is a runtime whose kube-apiserver (pods/exec) cannot be reached, as the kube
// runtime reports it.
type unreachableRuntime struct{ agentruntime.Runtime }

func (unreachableRuntime) Exec(context.Context, *agentsv1.Agent, agentruntime.ExecRequest) (agentruntime.ExecResult, error) {
	return agentruntime.ExecResult{}, fmt.Errorf("%w: %w", agentruntime.ErrUnavailable, refused())
}

func (unreachableRuntime) Logs(context.Context, *agentsv1.Agent, agentruntime.LogRequest) ([]string, error) {
	return nil, fmt.Errorf("%w: %w", agentruntime.ErrUnavailable, refused())
}

func (unreachableRuntime) ReadFile(context.Context, *agentsv1.Agent, string) ([]byte, error) {
	return nil, fmt.Errorf("%w: %w", agentruntime.ErrUnavailable, refused())
}

func (unreachableRuntime) WriteFile(context.Context, *agentsv1.Agent, string, []byte) error {
	return fmt.Errorf("%w: %w", agentruntime.ErrUnavailable, refused())
}

// routeBodies are well-formed bodies, so that each request gets past its shape checks to
// its lookups.
var routeBodies = map[string]any{
	"POST /v0/agents/{agentId}/console/exec":    map[string]any{"command": "true"},
	"PUT /v0/agents/{agentId}/config":           map[string]any{"config": map[string]any{}},
	"POST /v0/agents/{agentId}/config/validate": map[string]any{"config": map[string]any{}},
	"POST /v0/agents/{agentId}/tasks": map[string]any{
		"name": "t", "schedule": map[string]any{"kind": "every", "everyMs": 60000},
		"payload": map[string]any{"kind": "agentTurn", "message": "hi"},
	},
	"POST /v0/agents/{agentId}/files/upload":         map[string]any{"filename": "a.txt", "contentBase64": "aGk="},
	"POST /v0/agents/{agentId}/secrets":              map[string]any{"secretIds": []string{"missing-secret"}},
	"POST /v0/agents/{agentId}/domains":              map[string]any{"subdomain": "errs-sub"},
	"PATCH /v0/agents/{agentId}/domains/{domainId}":  map[string]any{"targetPort": 8080},
	"POST /v0/agents/{agentId}/snapshots/reset":      map[string]any{"snapshotCid": "bafkreifjjcie6lypi6ny7amxnfftagclbuxndqonfipmb64f2km2devei4"},
	"POST /v0/agents/{agentId}/skills":               map[string]any{"skillCids": []string{"bafkreifjjcie6lypi6ny7amxnfftagclbuxndqonfipmb64f2km2devei4"}},
	"POST /v0/agents/{agentId}/channels/{channel}":   map[string]any{"botToken": "123:abc"},
	"POST /v0/agents/{agentId}/gateway-token/rotate": nil,
	"POST /v0/agents/{agentId}/chat":                 map[string]any{"message": "hi"},
	"PUT /v0/agents/{agentId}/budget":                map[string]any{"tokensPerDay": 1000},
	"PUT /v0/agents/{agentId}/resources":             map[string]any{"memoryLimit": "512Mi"},
}

// objectParams are the path parameters that name an object the handler looks up.
var objectParams = []string{"{agentId}", "{secretId}", "{domainId}", "{skillId}", "{channel}"}

// lookupRoutes are the routes that look up an object named in their path.
func lookupRoutes(routes []facade.RouteInfo) []facade.RouteInfo {
	var out []facade.RouteInfo
	for _, r := range routes {
		for _, p := range objectParams {
			if strings.Contains(r.Path, p) {
				out = append(out, r)
				break
			}
		}
	}
	return out
}

// fill names objects in a route's path: agent for {agentId}, missing ones for the rest.
func fill(path, agent string) string {
	return strings.NewReplacer("{agentId}", agent, "{secretId}", "missing-secret", "{domainId}", "missing-domain",
		"{skillId}", "missing-skill", "{channel}", "telegram").Replace(path)
}

var _ = Describe("Errors keep their status", Ordered, func() {
	const ws = "errs"
	var (
		tok    string
		routes []facade.RouteInfo
		// startFacade starts a facade that answers through a kube-apiserver that fails as fail
		// says, and returns its URL.
		startFacade func(fail outage) string
	)

	BeforeAll(func() {
		workspace(ws, agentsv1.PlanPro, agentsv1.WorkspaceMember{UserID: "eve", Role: agentsv1.RoleOwner})
		tok = token(ws, "eve", "", auth.ScopeAll)
		// An agent that exists (stopped: nothing runs for it).
		Expect(k8sClient.Create(ctx, &agentsv1.Agent{
			ObjectMeta: metav1.ObjectMeta{Namespace: ws, Name: "present"},
			Spec:       agentsv1.AgentSpec{DisplayName: "Present", Stopped: true},
		})).To(Succeed())
		routes = lookupRoutes(plat.API.Routes())
		Expect(len(routes)).To(BeNumerically(">", 30))
		startFacade = func(fail outage) string {
			direct, err := client.NewWithWatch(env.Config, client.Options{Scheme: k8sClient.Scheme()})
			Expect(err).NotTo(HaveOccurred())
			opts := plat.API.OptionsForTest()
			c := failing(direct, fail)
			opts.Client, opts.APIReader, opts.Runtime = c, c, unreachableRuntime{}
			srv := httptest.NewServer(facade.New(opts))
			DeferCleanup(srv.Close)
			return srv.URL
		}
	})

	It("answers 404, not 500, for a missing object on every route that looks one up", func() {
		for _, r := range routes {
			agent := "missing-agent"
			if strings.Count(r.Path, "{") > 1 {
				agent = "present" // the agent exists; the other object does not
			}
			if r.Method == "POST" && strings.HasSuffix(r.Path, "/channels/{channel}") {
				continue // creates the channel
			}
			got := call(r.Method, fill(r.Path, agent), tok, routeBodies[r.Method+" "+r.Path])
			Expect(got.Status).To(Equal(404), "%s %s (agent %s): %s", r.Method, r.Path, agent, got.Raw)
		}
	})

	It("answers 503, not 500, on every such route when kube-apiserver is unreachable", func() {
		url := startFacade(func(client.Object, bool) error { return refused() })
		for _, r := range routes {
			for _, agent := range []string{"present", "missing-agent"} {
				got := callURL(url, r.Method, fill(r.Path, agent), tok, routeBodies[r.Method+" "+r.Path])
				Expect(got.Status).To(Equal(503), "%s %s (agent %s): %s", r.Method, r.Path, agent, got.Raw)
				Expect(got.v0Error()).To(Equal("Service unavailable"), "%s %s", r.Method, r.Path)
			}
		}
	})

	It("answers 503, not 500, when kube-apiserver goes away after the agent was read", func() {
		// Reads of the agent succeed; every other call (writes, other objects, pods/exec)
		// finds kube-apiserver unavailable.
		url := startFacade(func(obj client.Object, write bool) error {
			if _, isAgent := obj.(*agentsv1.Agent); isAgent && !write {
				return nil
			}
			return apierrors.NewServiceUnavailable("the server is currently unable to handle the request")
		})
		for _, r := range routes {
			got := callURL(url, r.Method, fill(r.Path, "present"), tok, routeBodies[r.Method+" "+r.Path])
			// Answered from the agent alone (200, or 404 for an object it does not name), or
			// 503: never a 500 that blames the operation for kube-apiserver's absence.
			Expect(got.Status).To(Or(BeNumerically("<", 500), Equal(503)), "%s %s: %s", r.Method, r.Path, got.Raw)
		}
	})

	It("checks the shape before any lookup: 11 unknown skills on a missing agent are a 400", func() {
		var cids []string
		for i := range 11 {
			cids = append(cids, fmt.Sprintf("unknown-skill-%d", i))
		}
		body := map[string]any{"skillCids": cids}
		got := call("POST", "/v0/agents/missing-agent/skills", tok, body)
		Expect(got.Status).To(Equal(400), got.Raw)
		Expect(got.v0Error()).To(Equal("Validation failed: skills exceeds maximum of 10"))
		down := startFacade(func(client.Object, bool) error { return refused() })
		got = callURL(down, "POST", "/v0/agents/present/skills", tok, body)
		Expect(got.Status).To(Equal(400), got.Raw)
	})

	It("checks the shape before any lookup on the other routes with a body", func() {
		down := startFacade(func(client.Object, bool) error { return refused() })
		for _, c := range []struct {
			method, path string
			body         any
			msg          string
		}{
			{"POST", "/v0/agents/missing-agent/console/exec", map[string]any{"command": " "}, "Invalid command"},
			{"POST", "/v0/agents/missing-agent/tasks", map[string]any{"name": "t"}, "Invalid parameters"},
			{"POST", "/v0/agents/missing-agent/snapshots/reset", map[string]any{}, "Invalid snapshot CID"},
			{"POST", "/v0/agents/missing-agent/files/upload", map[string]any{"filename": "", "contentBase64": "aGk="}, "Invalid filename"},
			{"POST", "/v0/agents/missing-agent/domains", map[string]any{}, "Exactly one of subdomain and customDomain is required"},
			{"PUT", "/v0/agents/missing-agent/config", map[string]any{"config": "x"}, "Invalid JSON"},
		} {
			for _, url := range []string{baseURL, down} {
				got := callURL(url, c.method, c.path, tok, c.body)
				Expect(got.Status).To(Equal(400), "%s %s: %s", c.method, c.path, got.Raw)
				Expect(got.v0Error()).To(Equal(c.msg), "%s %s", c.method, c.path)
			}
		}
	})
})
