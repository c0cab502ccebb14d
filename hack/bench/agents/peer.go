package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/agentplane/agentplane/hack/bench/internal/report"
	"github.com/agentplane/agentplane/internal/devtools/testenv/kubeenv"
)

// The peer's namespaces: its timed instances (a prefix no other run's namespace has) and the
// one that tells its manager is ready.
const (
	peerSpace     = "bench-peer"
	peerWarmSpace = "peer-warm"
)

var instanceGVK = schema.GroupVersionKind{Group: "openclaw.rocks", Version: "v1alpha1", Kind: "OpenClawInstance"}

// benchPeer times the peer operator (openclaw-rocks/openclaw-operator, its manager built from
// src and run as its own process with its binary's default flags) and then agentplane's
// manager (runKube, as mode kube runs it) on one envtest control plane: n OpenClawInstances
// until n StatefulSets exist, then n Agents until n StatefulSets exist.
func benchPeer(n int, src string, timeout time.Duration) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dir, err := os.MkdirTemp("", "agentplane-bench-peer-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin, err := buildPeer(ctx, src, dir)
	if err != nil {
		return err
	}
	env, err := kubeenv.Start()
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	if err := preparePeer(ctx, env, src, dir); err != nil {
		return err
	}
	args := peerArgs()
	pr, err := runPeerTimed(ctx, env, bin, args, dir, n, timeout)
	if err != nil {
		return err
	}
	objects, err := removeNamespaced(ctx, env.Config, peerSpace, peerWarmSpace)
	if err != nil {
		return fmt.Errorf("remove the peer's objects: %w", err)
	}
	pr.print(n, src, args, objects)

	// agentplane: as mode kube runs its manager.
	spaces := kubeSpaces(1)
	if err := benchWorkspaces(ctx, env.Client, n, spaces); err != nil {
		return err
	}
	run, err := runKube(ctx, env, n, spaces, timeout)
	if err != nil {
		return err
	}
	pr.compare(n, args, run)
	return nil
}

// buildPeer builds the peer's manager from src into dir and returns the binary's path.
func buildPeer(ctx context.Context, src, dir string) (string, error) {
	bin := filepath.Join(dir, "manager")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd")
	build.Dir, build.Env, build.Stdout, build.Stderr = src, append(os.Environ(), "GOWORK=off"), os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("build the peer's manager in %s: %w", src, err)
	}
	return bin, nil
}

// preparePeer installs the peer's CRDs from src, creates its namespaces and writes the
// kubeconfig of its own user (system:masters, as envtest's admin is) into dir.
func preparePeer(ctx context.Context, env *kubeenv.Env, src, dir string) error {
	if _, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{
		Paths: []string{filepath.Join(src, "config", "crd", "bases")}, ErrorIfPathMissing: true}); err != nil {
		return fmt.Errorf("the peer's CRDs: %w", err)
	}
	for _, ns := range []string{peerSpace, peerWarmSpace} {
		if err := env.Client.Create(ctx, kubeenv.Namespace(ns)); err != nil {
			return err
		}
	}
	user, err := env.AddUser(envtest.User{Name: "openclaw-operator", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "kubeconfig"), kubeconfig, 0o600)
}

// peerArgs: the binary's default probe address is :8081; on a machine where that port is
// taken it could not start, so then (only then) its probes are off, as agentplane's are here.
func peerArgs() []string {
	var args []string
	if l, err := net.Listen("tcp", ":8081"); err != nil {
		args = append(args, "--health-probe-bind-address=0")
	} else {
		_ = l.Close()
	}
	return args
}

// peerRun is what the peer's timed run measured.
type peerRun struct {
	ready, created, wall time.Duration
	times                []time.Duration
	got                  int
	waitErr              error // the wait timed out: wall is a lower bound
	exit, log            string
	requests, internal   float64
	top                  []keyCount
}

// runPeerTimed: the peer: its manager started, ready once its first instance has a
// StatefulSet, then n instances, 8 writers, timed from the first written to the last
// StatefulSet existing; then its manager stopped.
func runPeerTimed(ctx context.Context, env *kubeenv.Env, bin string, args []string, dir string, n int, timeout time.Duration) (*peerRun, error) {
	c := env.Client
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	prog, err := watchStatefulSets(watchCtx, env.Config, peerSpace, n)
	if err != nil {
		return nil, err
	}
	logf, err := os.CreateTemp("", "openclaw-operator-*.log")
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	r := &peerRun{log: logf.Name()}
	began := time.Now()
	p, err := startPeer(ctx, bin, args, dir, logf)
	if err != nil {
		return nil, err
	}
	defer p.stop()
	if err := createInstances(p.ctx, c, peerWarmSpace, 1); err != nil {
		return nil, p.failed(err)
	}
	if err := firstStatefulSet(p.ctx, c, peerWarmSpace, began); err != nil {
		return nil, p.failed(err)
	}
	r.ready = time.Since(began)
	counted, own := countRequests(env.Config)
	oc, err := client.New(counted, client.Options{Scheme: env.Scheme})
	if err != nil {
		return nil, err
	}
	before, err := apiserverRequests(ctx, env.Config)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if err := createInstances(p.ctx, oc, peerSpace, n); err != nil {
		return nil, p.failed(err)
	}
	r.created = time.Since(start)
	r.got, r.waitErr = prog.wait(p.ctx, timeout)
	r.times = prog.times(start)
	if r.waitErr != nil && (p.ctx.Err() != nil || len(r.times) == 0) {
		return nil, p.failed(r.waitErr)
	}
	after, err := apiserverRequests(ctx, env.Config)
	if err != nil {
		return nil, err
	}
	r.wall = r.times[len(r.times)-1]
	if r.waitErr != nil { // timeout: the wall time is a lower bound
		r.wall = timeout
	}
	stopWatch()
	r.exit = p.stop()
	r.requests, r.internal, r.top = peerRequestCount(before, after, own)
	return r, nil
}

// peerFlags says which flags the peer ran with.
func peerFlags(args []string) string {
	if len(args) > 0 {
		return strings.Join(args, " ") + " (port 8081 was taken)"
	}
	return "none"
}

// print prints the peer's run.
func (r *peerRun) print(n int, src string, args []string, objects string) {
	fmt.Printf("agents: the peer operator against agentplane, %d each, one envtest control plane\n", n)
	fmt.Printf("  peer: openclaw-rocks/openclaw-operator %s built from %s, its log %s\n", peerVersion(src), src, r.log)
	fmt.Printf("  peer flags: %s; KUBECONFIG for its own system:masters user; client: controller-runtime's default 20 QPS, burst 30 for each resource kind (its cmd/main.go sets none; controller-runtime's client has one limiter per kind); it ended with %s after SIGTERM\n", peerFlags(args), r.exit)
	lower := ""
	if r.waitErr != nil {
		lower = fmt.Sprintf(" at least (timed out with %d of %d StatefulSets)", r.got, n)
	}
	fmt.Printf("  peer manager        %8.2f s%s   (%.1f instances/s)\n", r.wall.Seconds(), lower, float64(r.got)/r.wall.Seconds())
	fmt.Printf("  (from the first OpenClawInstance created; its start to its first StatefulSet took %.2f s before; the benchmark's own creates, 8 writers, took %.2f s; the first StatefulSet appeared after %.2f s)\n",
		r.ready.Seconds(), r.created.Seconds(), r.times[0].Seconds())
	fmt.Printf("  peer API requests: %.0f (%.1f per instance), the API server's apiserver_request_total over the timed run less the benchmark's own and %.0f it made itself (ipaddresses, leases); most frequent:\n",
		r.requests, r.requests/float64(n), r.internal)
	for _, k := range r.top {
		fmt.Printf("    %-48s %6.0f  (%.2f per instance)\n", k.key, k.n, k.n/float64(n))
	}
	fmt.Printf("  peer objects per instance: %s\n", objects)
}

// compare prints agentplane's run against the peer's and adds both to the JSON rows.
func (r *peerRun) compare(n int, args []string, run *kubeRun) {
	fmt.Printf("  agentplane manager  %8.2f s   (%.0f agents/s)\n", run.reconciled.Seconds(), float64(n)/run.reconciled.Seconds())
	fmt.Printf("  (%s; its start to its first StatefulSet took %.2f s before; the benchmark's own creates took %.2f s; the first StatefulSet appeared after %.2f s)\n",
		clientSettings(), run.ready.Seconds(), run.created.Seconds(), run.times[0].Seconds())
	perAgent := run.requests.print(n)
	ratio := r.wall.Seconds() / run.reconciled.Seconds()
	atLeast := ""
	if r.waitErr != nil {
		atLeast = " at least"
	}
	fmt.Printf("  ratio peer/agentplane: %.1f%s (target >= 25 at 500)\n", ratio, atLeast)

	row := fmt.Sprintf("%d instances / %d agents, shipped flags", n, n)
	if flagsLabel() != "shipped flags" {
		row = fmt.Sprintf("%d instances / %d agents, agentplane %s", n, n, flagsLabel())
	}
	metric := "wall time"
	if r.waitErr != nil {
		metric = fmt.Sprintf("wall time, at least (peer timed out with %d of %d)", r.got, n)
	}
	settings := ""
	if len(args) > 0 {
		settings = "peer " + peerFlags(args)
	}
	base := "agentplane's manager, same run"
	jsonRows = append(jsonRows,
		report.Result{Bench: "agents-peer", Row: row, Metric: metric, Value: r.wall.Seconds(), Unit: "s", Settings: settings,
			Baseline: base, BaselineValue: run.reconciled.Seconds(), Ratio: ratio, RatioOf: "peer / agentplane; target >= 25 at 500"},
		report.Result{Bench: "agents-peer", Row: row, Metric: "API requests per agent", Value: r.requests / float64(n), Unit: "requests", Settings: settings,
			Baseline: base, BaselineValue: perAgent, Ratio: r.requests / float64(n) / perAgent, RatioOf: "peer / agentplane"},
		report.Result{Bench: "agents-peer", Row: row, Metric: "manager start to its first StatefulSet (before the timed run)", Value: r.ready.Seconds(), Unit: "s", Settings: settings,
			Baseline: base, BaselineValue: run.ready.Seconds(), Ratio: r.ready.Seconds() / run.ready.Seconds(), RatioOf: "peer / agentplane"},
	)
}

// peerProc is the peer's manager process; ctx ends when it exits.
type peerProc struct {
	cmd    *exec.Cmd
	ctx    context.Context
	done   chan struct{}
	err    error
	log    string
	exited bool
}

// startPeer starts bin with args, the kubeconfig in dir and nothing else of this process's
// environment, its output to log, in its own process group, killed if this process dies.
func startPeer(ctx context.Context, bin string, args []string, dir string, log *os.File) (*peerProc, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"KUBECONFIG=" + filepath.Join(dir, "kubeconfig"), "HOME=" + dir, "PATH=/usr/bin:/bin"}
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	pctx, cancel := context.WithCancel(ctx)
	p := &peerProc{cmd: cmd, ctx: pctx, done: make(chan struct{}), log: log.Name()}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
		cancel()
	}()
	return p, nil
}

// stop ends the process (SIGTERM to its group, SIGKILL 10 s later) and says how it ended.
// It may be called again.
func (p *peerProc) stop() string {
	select {
	case <-p.done:
		p.exited = true
	default:
	}
	if !p.exited {
		p.exited = true
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	}
	if p.err == nil {
		return "exit status 0"
	}
	return p.err.Error()
}

// failed adds to err that the peer exited, if it did, and where its log is.
func (p *peerProc) failed(err error) error {
	select {
	case <-p.done:
		return fmt.Errorf("the peer's manager exited (%v; its log %s): %w", p.err, p.log, err)
	default:
		return fmt.Errorf("%w (the peer's log %s)", err, p.log)
	}
}

// createInstances creates n minimal OpenClawInstances (an empty spec: the CRD's defaults)
// oc-0000.. in ns, 8 at a time.
func createInstances(ctx context.Context, c client.Client, ns string, n int) error {
	return parallel(8, n, func(i int) error {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{}}}
		u.SetGroupVersionKind(instanceGVK)
		u.SetNamespace(ns)
		u.SetName(fmt.Sprintf("oc-%04d", i))
		return c.Create(ctx, u)
	})
}

// peerVersion is the release src says it is (release-please's manifest), if it says.
func peerVersion(src string) string {
	var m map[string]string
	raw, err := os.ReadFile(filepath.Join(src, ".release-please-manifest.json"))
	if err != nil || json.Unmarshal(raw, &m) != nil || m["."] == "" {
		return "(version unknown)"
	}
	return "v" + m["."]
}
