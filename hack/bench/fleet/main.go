// Command fleet measures the console's fleet page with many agents in Debian's chromium: the
// time from navigation until every agent is in (the fleet counts them and paints its first
// rows), against the console's agent list page (every row in its table) in the same run,
// alternating; the API requests each page made; and the bytes of the fleet's snapshot
// against the agent list's. The agents are stopped (no gateway runs: this measures the page,
// the facade and the cache, not the runtime).
//
//	go run ./hack/bench/fleet -n 1000 -rounds 5
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/hack/bench/internal/report"
	"github.com/agentplane/agentplane/internal/devtools/testenv"
	"github.com/agentplane/agentplane/pkg/agentplanetest"
)

const workspace = "bench-fleet"

func main() {
	n := flag.Int("n", 1000, "agents")
	rounds := flag.Int("rounds", 5, "page loads of each page, alternating")
	jsonOut := report.Flag()
	flag.Parse()
	ctrllog.SetLogger(logr.Discard())
	if err := run(*n, *rounds, *jsonOut); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

type paint struct {
	Fleet, List                 []float64
	FleetRequests, ListRequests []int
}

func run(n, rounds int, jsonOut string) error {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		return fmt.Errorf("chromium is required: run hack/install-chromium.sh")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	root := testenv.RepoRoot()
	dir, err := npmDir(ctx, root)
	if err != nil {
		return err
	}
	env := agentplanetest.NewEnvironment()
	cfg, err := env.Start()
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	p, err := agentplanetest.Start(ctx, cfg, agentplanetest.WithLogger(logr.Discard()))
	if err != nil {
		return err
	}
	defer func() { _ = p.Stop() }()
	tok, err := p.Token(workspace)
	if err != nil {
		return err
	}
	fmt.Printf("creating %d stopped agents...\n", n)
	for i := range n {
		a := &agentsv1.Agent{
			ObjectMeta: metav1.ObjectMeta{Namespace: workspace, Name: fmt.Sprintf("agt-bench%05d", i)},
			Spec: agentsv1.AgentSpec{DisplayName: fmt.Sprintf("agent %d", i), Stopped: true,
				Engine: agentsv1.EngineSpec{Name: agentsv1.EngineOpenClaw}},
		}
		if err := p.Client().Create(ctx, a); err != nil {
			return err
		}
	}
	fleetBytes, listBytes, err := payloads(ctx, p.URL(), tok, n)
	if err != nil {
		return err
	}
	got, err := measure(ctx, dir, chromium, p.URL(), tok, n, rounds)
	if err != nil {
		return err
	}
	return publish(n, rounds, got, fleetBytes, listBytes, jsonOut)
}

// npmDir installs playwright-core (the console's browser tests' packages) and puts the
// script beside it.
func npmDir(ctx context.Context, root string) (string, error) {
	install := exec.CommandContext(ctx, filepath.Join(root, "hack", "npm-cache.sh"), "console-browser", filepath.Join(root, "test", "browser"))
	install.Stderr = os.Stderr
	out, err := install.Output()
	if err != nil {
		return "", fmt.Errorf("installing playwright-core: %w", err)
	}
	dir := strings.TrimSpace(string(out))
	script, err := os.ReadFile(filepath.Join(root, "hack", "bench", "fleet", "firstpaint.mjs"))
	if err != nil {
		return "", err
	}
	return dir, os.WriteFile(filepath.Join(dir, "bench-fleet-firstpaint.mjs"), script, 0o644)
}

// payloads waits until the fleet shows every agent (the cache has them) and returns the
// sizes of GET /v0/fleet and GET /v0/agents.
func payloads(ctx context.Context, url, tok string, n int) (int, int, error) {
	get := func(path string) ([]byte, error) {
		req, _ := http.NewRequestWithContext(ctx, "GET", url+path, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		return io.ReadAll(resp.Body)
	}
	for {
		raw, err := get("/v0/fleet")
		if err != nil {
			return 0, 0, err
		}
		var f struct{ Agents []json.RawMessage }
		if json.Unmarshal(raw, &f) == nil && len(f.Agents) == n {
			list, err := get("/v0/agents")
			return len(raw), len(list), err
		}
		select {
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case <-time.After(200 * time.Millisecond): // polling the facade for the cache, not a sync
		}
	}
}

func measure(ctx context.Context, dir, chromium, url, tok string, n, rounds int) (paint, error) {
	node := exec.CommandContext(ctx, "node", filepath.Join(dir, "bench-fleet-firstpaint.mjs"))
	node.Dir = dir
	node.Env = append(os.Environ(), "AGENTPLANE_URL="+url, "AGENTPLANE_TOKEN="+tok, "CHROMIUM="+chromium,
		fmt.Sprintf("AGENTS=%d", n), fmt.Sprintf("ROUNDS=%d", rounds))
	node.Stderr = os.Stderr
	node.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	node.Cancel = func() error { return syscall.Kill(-node.Process.Pid, syscall.SIGKILL) }
	out, err := node.Output()
	if node.Process != nil {
		_ = syscall.Kill(-node.Process.Pid, syscall.SIGKILL)
	}
	if err != nil {
		return paint{}, fmt.Errorf("the browser run failed: %w", err)
	}
	var got paint
	return got, json.Unmarshal(out, &got)
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func publish(n, rounds int, got paint, fleetBytes, listBytes int, jsonOut string) error {
	f, l := median(got.Fleet), median(got.List)
	fmt.Printf("%d agents, median of %d loads each:\n", n, rounds)
	fmt.Printf("  first paint: fleet %.0f ms, agent list %.0f ms (fleet / list %.2f)\n", f, l, f/l)
	fmt.Printf("  API requests per load: fleet %v, agent list %v\n", got.FleetRequests, got.ListRequests)
	fmt.Printf("  payload: GET /v0/fleet %d bytes, GET /v0/agents %d bytes (fleet / list %.2f)\n",
		fleetBytes, listBytes, float64(fleetBytes)/float64(listBytes))
	row := fmt.Sprintf("%d agents", n)
	return report.Write(jsonOut, []report.Result{
		{Bench: "fleet", Row: row, Metric: "first paint (median)", Value: f, Unit: "ms",
			Baseline: "the agent list page", BaselineValue: l, Ratio: f / l, RatioOf: "fleet / list"},
		{Bench: "fleet", Row: row, Metric: "payload", Value: float64(fleetBytes), Unit: "bytes",
			Baseline: "GET /v0/agents", BaselineValue: float64(listBytes), Ratio: float64(fleetBytes) / float64(listBytes), RatioOf: "fleet / list"},
		{Bench: "fleet", Row: row, Metric: "API requests per load", Value: float64(slices.Max(got.FleetRequests)), Unit: "requests"},
	})
}
