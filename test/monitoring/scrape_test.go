package monitoring_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/dnsverify/dnstest"
	"github.com/agentplane/agentplane/internal/adapters/storage/local"
	"github.com/agentplane/agentplane/internal/devtools/fakeclaw"
	"github.com/agentplane/agentplane/internal/platform"
	"github.com/agentplane/agentplane/pkg/agentplanetest"
)

// A platform (local runtime, the engine double, local storage, a DNS server on loopback)
// serves its metrics on an HTTP port; a scenario through the REST door moves every series an
// on-call person reads, with the labels README "Monitoring" documents; and every series the
// alert rules and the dashboards query is one the platform exports.
func TestScrape(t *testing.T) {
	env := sharedEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	dns, err := dnstest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer dns.Stop()
	state := t.TempDir()
	filesDir := filepath.Join(state, "files")
	files, err := local.New(filesDir)
	if err != nil {
		t.Fatal(err)
	}
	engineDir, err := fakeclaw.EngineDir()
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr := freeAddr(t)
	emb, err := platform.RunEmbedded(ctx, env.Config, platform.Options{
		APIAddr: "127.0.0.1:0", MetricsAddr: metricsAddr, ProbeAddr: "0",
		Log: testr.New(t), SkipNameValidation: true, ProvisionTimeout: 60 * time.Second,
		Files: files,
		Runtime: platform.RuntimeOptions{
			Name: platform.RuntimeLocal, StateDir: filepath.Join(state, "runtime"),
			EngineDirs: map[string]string{agentplanetest.FakeEngineVersion: engineDir},
		},
		Domains: platform.DomainOptions{
			Nameservers: []string{dns.Addr}, CheckInterval: 100 * time.Millisecond, MaxCheckInterval: 500 * time.Millisecond,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := emb.Stop(); err != nil {
			t.Errorf("stop the platform: %v", err)
		}
	}()
	tok, err := platform.OwnerToken(ctx, env.Client, emb.Signer, "oncall", "pat", "monitoring test")
	if err != nil {
		t.Fatal(err)
	}
	api := &rest{t: t, base: emb.URL, token: tok}
	metricsURL := "http://" + metricsAddr + "/metrics"
	before := eventually(t, "the metrics endpoint answers", func() (scrape, bool) { return scrapeOf(metricsURL) })

	// A warm pool, then an agent that claims its gateway and runs.
	pool := &agentsv1.GatewayPool{ObjectMeta: metav1.ObjectMeta{Name: "oncall-pool"}, Spec: agentsv1.GatewayPoolSpec{Replicas: 1}}
	if err := env.Client.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = client.IgnoreNotFound(env.Client.Delete(context.Background(), pool)) }()
	eventually(t, "the pool has a ready gateway", func() (int32, bool) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pool), pool); err != nil {
			return 0, false
		}
		return pool.Status.Ready, pool.Status.Ready == 1
	})
	created := api.call("POST", "/v0/agents", map[string]any{"name": "oncall"}, 201)
	id, _ := created["agent"].(map[string]any)["id"].(string)
	if id == "" {
		t.Fatalf("no agent id in %v", created)
	}
	// Asleep and awake again: neither counts as a second provisioning.
	api.call("POST", "/v0/agents/"+id+"/suspend", nil, 200)
	api.call("POST", "/v0/agents/"+id+"/resume", nil, 200)
	// A request that fails.
	api.call("GET", "/v0/agents/agt-missing", nil, 404)
	// An upload while storage works, and one while it cannot be reached (its directory
	// replaced by a file): 503.
	api.upload("up.txt", 200)
	if err := os.Rename(filesDir, filesDir+".away"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filesDir, []byte("not a directory"), 0o644); err != nil {
		t.Fatal(err)
	}
	api.upload("down.txt", 503)
	if err := os.Remove(filesDir); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filesDir+".away", filesDir); err != nil {
		t.Fatal(err)
	}
	// A custom domain whose TXT record is not there, then a DNS server that fails.
	api.call("POST", "/v0/agents/"+id+"/domains", map[string]any{"customDomain": "docs.oncall.example.com"}, 201)
	dnsMoved := func(result string) func() (scrape, bool) {
		return func() (scrape, bool) {
			s, ok := scrapeOf(metricsURL)
			return s, ok && s.sum("agentplane_dns_lookups_total", "result", result) > before.sum("agentplane_dns_lookups_total", "result", result)
		}
	}
	eventually(t, "a TXT look-up answered not_found", dnsMoved("not_found"))
	dns.SetMode(dnstest.ServFail)
	eventually(t, "a TXT look-up failed", dnsMoved("error"))

	after := eventually(t, "the agent counts as running", func() (scrape, bool) {
		s, ok := scrapeOf(metricsURL)
		return s, ok && s.sum("agentplane_agents", "phase", "running") == 1
	})
	moved := []struct {
		what          string
		name          string
		labels        []string
		atLeast, most float64 // how much it moved
	}{
		{"one agent provisioned (the resume does not count)", "agentplane_agent_provision_duration_seconds_count", nil, 1, 1},
		{"the warm gateway was claimed", "agentplane_gateway_pool_claims_total", []string{"pool", "oncall-pool"}, 1, 1},
		{"the claim's latency", "agentplane_gateway_pool_claim_duration_seconds_count", []string{"pool", "oncall-pool"}, 1, 1},
		{"the suspension", "agentplane_agent_suspensions_total", []string{"reason", agentsv1.ReasonSuspendedBySpec}, 1, 1},
		{"the wake", "agentplane_agent_wakes_total", []string{"reason", "Resume"}, 1, 1},
		{"the agent create", "agentplane_http_requests_total", []string{"route", "POST /v0/agents", "method", "POST", "code", "201"}, 1, 1},
		{"the failed request", "agentplane_http_requests_total", []string{"route", "GET /v0/agents/{agentId}", "method", "GET", "code", "404"}, 1, 1},
		{"the failed upload", "agentplane_http_requests_total", []string{"route", "POST /v3/files", "code", "503"}, 1, 1},
		{"the stored upload", "agentplane_storage_operations_total", []string{"backend", "local", "op", "put", "result", "ok"}, 1, 100},
		{"the storage failure", "agentplane_storage_operations_total", []string{"backend", "local", "op", "put", "result", "error"}, 1, 5},
		{"TXT look-ups without a record", "agentplane_dns_lookups_total", []string{"result", "not_found"}, 1, 1000},
		{"TXT look-ups DNS failed", "agentplane_dns_lookups_total", []string{"result", "error"}, 1, 1000},
		{"the agent controller's passes", "controller_runtime_reconcile_total", []string{"controller", "agent", "result", "success"}, 1, 1000},
	}
	for _, m := range moved {
		d := after.sum(m.name, m.labels...) - before.sum(m.name, m.labels...)
		if d < m.atLeast || d > m.most {
			t.Errorf("%s: %s%v moved by %v, want %v..%v", m.what, m.name, m.labels, d, m.atLeast, m.most)
		}
	}
	present := [][]string{
		{"agentplane_agents_failed"},
		{"agentplane_agents", "phase", "starting"}, {"agentplane_agents", "phase", "not_running"}, {"agentplane_agents", "phase", "suspended"},
		{"agentplane_gateway_pool_members", "pool", "oncall-pool", "state", "ready"},
		{"controller_runtime_reconcile_errors_total", "controller", "agent"},
		{"controller_runtime_reconcile_errors_total", "controller", "domain"},
	}
	for _, p := range present {
		if !after.has(p[0], p[1:]...) {
			t.Errorf("no series %s%v", p[0], p[1:])
		}
	}
	if f := after.sum("agentplane_agents_failed"); f != 0 {
		t.Errorf("agentplane_agents_failed = %v with one running agent", f)
	}
	for name, where := range usedMetricNames(t) {
		if name == "up" {
			continue // Prometheus's own, per target
		}
		if !after.has(name) {
			t.Errorf("%s (used by %v) is not exported", name, where)
		}
	}
}

// freeAddr is a loopback address with a port nobody listens on now.
func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// eventually polls f (every 100 ms, up to a minute) until it says done, and returns its value.
func eventually[T any](t *testing.T, what string, f func() (T, bool)) T {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		v, ok := f()
		if ok {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s (last: %v)", what, v)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// rest calls the REST facade with a token.
type rest struct {
	t           *testing.T
	base, token string
}

func (r *rest) do(req *http.Request, want int) map[string]any {
	r.t.Helper()
	req.Header.Set("Authorization", "Bearer "+r.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		r.t.Fatalf("%s %s: %d %s, want %d", req.Method, req.URL.Path, resp.StatusCode, raw, want)
	}
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	return body
}

func (r *rest) call(method, path string, body any, want int) map[string]any {
	r.t.Helper()
	var rd io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, r.base+path, rd)
	if err != nil {
		r.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	return r.do(req, want)
}

// upload posts a file as the pinata SDK does.
func (r *rest) upload(name string, want int) {
	r.t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, _ := mw.CreateFormFile("file", name)
	fmt.Fprintf(fw, "bytes of %s at %s", name, time.Now())
	_ = mw.Close()
	req, err := http.NewRequest("POST", r.base+"/v3/files", &buf)
	if err != nil {
		r.t.Fatal(err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	r.do(req, want)
}
