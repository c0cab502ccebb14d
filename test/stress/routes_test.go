package stress

import (
	"bytes"
	"crypto/sha256"
	"encoding/base32"
	"encoding/base64"
	"fmt"
	"mime/multipart"
	"regexp"
	"strings"
	"testing"
	"time"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/facade"
)

// ids names a workspace's objects by the route parameter (or body member) that refers to
// them: agentId, secretId, domainId, skillId, slug, skillCid, network, id (file), cid (file),
// snapshotCid, channel, issueId.
type ids map[string]string

// populate fills workspace ws (whose token is tok) with one object of every kind the routes
// name: a running agent with an attached secret, a subdomain, an attached skill, a snapshot
// and, on the pro plan, a telegram channel; a /v3 file; an issue when the workspace is
// internal. It returns their ids.
func populate(t *testing.T, ws, tok string) ids {
	t.Helper()
	w := &agentsv1.Workspace{}
	if err := k8s.Get(bg(), keyOf("", ws), w); err != nil {
		t.Fatal(err)
	}
	agent := newAgent(t, mainURL, tok, ws+" agent")
	// No conversation is made (a chat turn needs the engine's chat endpoint turned on): its
	// id, well-formed and the workspace's own, names one that the agent does not have.
	sum := sha256.Sum256([]byte(ws))
	conv := "cnv-" + strings.ToLower(base32.StdEncoding.EncodeToString(sum[:]))[:16]
	id := ids{"agentId": agent, "network": "public", "channel": "telegram", "slug": ws + "-skill", "conversationId": conv}
	r := expect(t, call(mainURL, "POST", "/v0/secrets", tok, map[string]any{
		"name": strings.ToUpper(strings.ReplaceAll(ws, "-", "_")) + "_KEY", "value": remember("secret value", ws+"-secret-value-"+stamp()),
	}), 201, "create secret")
	id["secretId"] = r.obj("secret")["id"].(string)
	expect(t, call(mainURL, "POST", "/v0/agents/"+agent+"/secrets", tok, map[string]any{"secretIds": []string{id["secretId"]}}), 200, "attach secret")
	r = expect(t, call(mainURL, "POST", "/v0/agents/"+agent+"/domains", tok, map[string]any{"subdomain": ws + "-site"}), 201, "create domain")
	id["domainId"] = r.obj("domain")["id"].(string)
	id["skillCid"] = publish(id["slug"], "1.0.0")
	r = expect(t, call(mainURL, "POST", "/v0/clawhub/"+id["slug"]+"/install", tok, nil), 201, "install skill")
	id["skillId"] = r.obj("skill")["id"].(string)
	expect(t, call(mainURL, "POST", "/v0/agents/"+agent+"/skills", tok, map[string]any{"skillCids": []string{id["skillCid"]}}), 200, "attach skill")
	r = expect(t, call(mainURL, "POST", "/v3/files", tok, fileUpload(ws+".txt", "the file of "+ws)), 200, "upload file")
	id["id"], id["cid"] = r.obj("data")["id"].(string), r.obj("data")["cid"].(string)
	r = expect(t, call(mainURL, "POST", "/v0/agents/"+agent+"/snapshots/sync", tok, nil), 201, "sync snapshot")
	id["snapshotCid"] = r.obj("snapshot")["cid"].(string)
	if w.Spec.Internal {
		r = expect(t, call(mainURL, "POST", "/v0/issues", tok, map[string]any{"title": "issue of " + ws, "agentId": agent}), 201, "create issue")
		id["issueId"] = r.obj("issue")["id"].(string)
	}
	if w.Spec.Plan == agentsv1.PlanPro {
		bot := remember("telegram bot token", "123456789:"+ws+"-bot-"+stamp())
		expect(t, call(mainURL, "POST", "/v0/agents/"+agent+"/channels/telegram", tok, map[string]any{"botToken": bot}), 201, "set up telegram")
	}
	return id
}

// stamp is a unique suffix.
func stamp() string { return fmt.Sprintf("%x", time.Now().UnixNano()) }

// fileUpload is a multipart body of POST /v3/files.
func fileUpload(name, content string) rawBody {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, _ := mw.CreateFormFile("file", name)
	_, _ = fw.Write([]byte(content))
	_ = mw.WriteField("network", "public")
	_ = mw.Close()
	return rawBody{data: buf.Bytes(), contentType: mw.FormDataContentType()}
}

// routeCall is one request of a route.
type routeCall struct {
	route        facade.RouteInfo
	method, path string
	body         any
}

func (c routeCall) String() string { return c.method + " " + c.path }

var paramRe = regexp.MustCompile(`\{([A-Za-z]+)\}`)

// bodies are the request bodies of the routes that take one, built from the ids the call
// uses: well-formed, so that a refusal is about the objects named, not the shape.
var bodies = map[string]func(id ids) any{
	"POST /v0/agents":                                func(ids) any { return map[string]any{"name": "route sweep " + stamp()} },
	"POST /v0/agents/{agentId}/restart":              func(ids) any { return map[string]any{} },
	"POST /v0/agents/{agentId}/suspend":              func(ids) any { return nil },
	"POST /v0/agents/{agentId}/resume":               func(ids) any { return nil },
	"POST /v0/agents/{agentId}/gateway-token/rotate": func(ids) any { return nil },
	"POST /v0/agents/{agentId}/platform/token":       func(ids) any { return nil },
	"POST /v0/agents/{agentId}/scripts/retry":        func(ids) any { return nil },
	"POST /v0/agents/{agentId}/console/exec":         func(ids) any { return map[string]any{"command": "true"} },
	"PUT /v0/agents/{agentId}/config":                func(ids) any { return map[string]any{"config": map[string]any{}} },
	"POST /v0/agents/{agentId}/config/validate":      func(ids) any { return map[string]any{"config": map[string]any{}} },
	"POST /v0/agents/{agentId}/files/upload": func(ids) any {
		return map[string]any{"filename": "sweep.txt", "contentBase64": base64.StdEncoding.EncodeToString([]byte("x"))}
	},
	"POST /v0/secrets":                                    func(ids) any { return map[string]any{"name": "SWEEP_" + stamp(), "value": "sweep"} },
	"POST /v0/agents/{agentId}/secrets":                   func(id ids) any { return map[string]any{"secretIds": []string{id["secretId"]}} },
	"POST /v0/issues":                                     func(id ids) any { return map[string]any{"title": "sweep", "agentId": id["agentId"]} },
	"POST /v3/files":                                      func(ids) any { return fileUpload("sweep.txt", "sweep "+stamp()) },
	"POST /v0/agents/{agentId}/domains":                   func(ids) any { return map[string]any{"subdomain": "sweep-" + stamp()} },
	"PATCH /v0/agents/{agentId}/domains/{domainId}":       func(ids) any { return map[string]any{"targetPort": 8080} },
	"POST /v0/agents/{agentId}/domains/{domainId}/verify": func(ids) any { return nil },
	"POST /v0/agents/{agentId}/snapshots/sync":            func(ids) any { return nil },
	"POST /v0/agents/{agentId}/snapshots/reset":           func(id ids) any { return map[string]any{"snapshotCid": id["snapshotCid"]} },
	"POST /v0/clawhub/{slug}/install":                     func(ids) any { return nil },
	"POST /v0/agents/{agentId}/skills":                    func(id ids) any { return map[string]any{"skillCids": []string{id["skillCid"]}} },
	"POST /v0/agents/{agentId}/skills/{skillId}/update":   func(ids) any { return nil },
	"POST /v0/agents/{agentId}/channels/{channel}":        func(ids) any { return map[string]any{"botToken": "123456789:route-sweep"} },
	"POST /v0/agents/{agentId}/tasks": func(ids) any {
		return map[string]any{"name": "sweep", "schedule": map[string]any{"kind": "every", "everyMs": 3600000},
			"payload": map[string]any{"kind": "systemEvent", "text": "sweep"}}
	},
	"POST /v0/agents/{agentId}/chat":     func(ids) any { return map[string]any{"message": "route sweep"} },
	"PUT /v0/agents/{agentId}/budget":    func(ids) any { return map[string]any{"tokensPerDay": 1000000} },
	"PUT /v0/agents/{agentId}/resources": func(ids) any { return map[string]any{"memoryLimit": "1Gi"} },
	"PUT /v0/workspace/budget":           func(ids) any { return map[string]any{"tokensPerDay": 10000000} },
	"POST /v3/files/{network}/signature/{cid}": func(ids) any {
		return map[string]any{"signature": "0x" + strings.Repeat("00", 65), "address": "0x" + strings.Repeat("00", 20)}
	},
}

// bodyRefs are the body members (by ids key) a route's body refers to objects with.
var bodyRefs = map[string][]string{
	"POST /v0/agents/{agentId}/secrets":         {"secretId"},
	"POST /v0/issues":                           {"agentId"},
	"POST /v0/agents/{agentId}/snapshots/reset": {"snapshotCid"},
	"POST /v0/agents/{agentId}/skills":          {"skillCid"},
}

// callFor builds the request of route r with the objects of id: every path parameter is
// substituted and the body built. It fails t when the route has a parameter or (for a
// method with a body) a body this package does not know: a new route must be added here.
func callFor(t testing.TB, r facade.RouteInfo, id ids) routeCall {
	t.Helper()
	pattern := r.Method + " " + r.Path
	path := paramRe.ReplaceAllStringFunc(r.Path, func(m string) string {
		v, ok := id[m[1:len(m)-1]]
		if !ok {
			t.Fatalf("route %s: no value for %s: teach test/stress/routes_test.go about it", pattern, m)
		}
		return v
	})
	c := routeCall{route: r, method: r.Method, path: path}
	if mk, ok := bodies[pattern]; ok {
		c.body = mk(id)
	} else if r.Method == "POST" || r.Method == "PUT" || r.Method == "PATCH" {
		t.Fatalf("route %s: no request body known: teach test/stress/routes_test.go about it", pattern)
	}
	return c
}

// pathParams are the parameter names of a route's path.
func pathParams(r facade.RouteInfo) []string {
	var out []string
	for _, m := range paramRe.FindAllStringSubmatch(r.Path, -1) {
		out = append(out, m[1])
	}
	return out
}
