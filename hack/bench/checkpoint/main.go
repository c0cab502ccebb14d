// Command checkpoint measures what a CRIU checkpoint buys a suspended agent of the local
// runtime, against the cold resume, in the same run, with the real OpenClaw engine
// (AGENTPLANE_ENGINE_DIR or hack/install-engine.sh) and CRIU ($AGENTPLANE_CRIU or bin/criu,
// make criu), as root:
//
//	go run ./hack/bench/checkpoint -n 3
//
// One sandboxed agent boots, then each round suspends and resumes it twice, in rotating
// order: once checkpointed (Desired.Suspended: the runtime checkpoints the gateway and
// restores it, its memory on demand as shipped) and once cold (a plain stop and a fresh
// boot); in between, the same agent of a second runtime with EagerRestore (its own state dir)
// is checkpointed and restored with its memory copied in full first, the baseline of the
// restore on demand. Resume is the time from the waking Ensure to the first command run in
// the agent (runtime.Exec `true`) after the gateway answers its health check again; suspend
// the time of the suspending Ensure. It also prints the checkpoint's size and the agent's RSS
// before the suspend and after the resume, the medians and the ratios.
//
// The runtime gives new agents copies of their engine's template, as shipped
// (--gateway-templates; the reseed addon from $AGENTPLANE_RESEED or bin/, make
// sandbox-packages). The agent above is the engine's first, which boots cold while the
// template is made. Then, n times, a new agent born from the template idles and is suspended:
// its checkpoint's own disk (thinned against the template) against the same checkpoint whole,
// and its wake; then it idles and is suspended again, and once its checkpoint is compressed
// (the runtime's CheckpointPackAfter, -pack-after here: the first rounds wake well before it)
// the same disk and wake from the compressed checkpoint.
//
// -log FILE keeps the runtime's log, its lines timestamped to the millisecond: where a wake's
// time goes (the page server's start, the restore, the first health answer, the exec).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ktypes "k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/hack/bench/internal/benchkit"
	"github.com/agentplane/agentplane/hack/bench/internal/report"
	"github.com/agentplane/agentplane/internal/adapters/engine/openclaw"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/adapters/runtime/local"
)

func main() {
	n := flag.Int("n", 3, "rounds (one checkpointed and one cold suspend and resume each)")
	idle := flag.Duration("idle", 10*time.Second, "quiet time before each suspend")
	packAfter = flag.Duration("pack-after", 30*time.Second, "the runtime's CheckpointPackAfter: the first rounds wake well before it, the born agents' second sleep waits for it")
	jsonOut = report.Flag()
	logPath = flag.String("log", "", "write the runtime's log to this file (timestamped: where a wake's time goes)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *n, *idle); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// packAfter is -pack-after.
var packAfter *time.Duration

// logPath is -log.
var logPath *string

// jsonOut is -json: where the results go for `make bench`.
var jsonOut *string

// runtimeLog is the runtime's logger: into the file at path, each line timestamped to the
// millisecond, or nowhere when path is empty.
func runtimeLog(path string) (logr.Logger, func(), error) {
	if path == "" {
		return logr.Discard(), func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return logr.Logger{}, nil, err
	}
	return zap.New(zap.WriteTo(f), func(o *zap.Options) { o.TimeEncoder = zapcore.ISO8601TimeEncoder }), func() { _ = f.Close() }, nil
}

type sample struct {
	suspend, resume, rssBefore, rssAfter, imageMiB float64
}

func run(ctx context.Context, n int, idle time.Duration) error {
	engineDir, version, err := benchkit.Engine()
	if err != nil {
		return err
	}
	criu := os.Getenv(local.CRIUEnv)
	if criu == "" {
		criu, _ = filepath.Abs("bin/criu")
	}
	benchkit.BinEnv(local.ReseedEnv, local.ReseedName)
	state, err := os.MkdirTemp("", "agentplane-bench-checkpoint-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(state)
	log, closeLog, err := runtimeLog(*logPath)
	if err != nil {
		return err
	}
	defer closeLog()
	opts := local.Options{
		StateDir: state, Engine: openclaw.New(), EngineDirs: map[string]string{version: engineDir},
		Log: log, Sandbox: local.SandboxRequired, CRIU: criu, Templates: true,
		CheckpointPackAfter: *packAfter,
	}
	rt, err := local.New(opts)
	if err != nil {
		return err
	}
	defer func() { _ = rt.Shutdown(context.Background()) }()
	if ok, why := rt.Checkpoints(); !ok {
		return fmt.Errorf("this runtime does not checkpoint: %s", why)
	}
	if ok, why := rt.LazyRestore(); !ok {
		return fmt.Errorf("this runtime does not restore memory on demand: %s", why)
	}
	// The baseline of the restore on demand: a second runtime (its own state dir, no
	// templates: its agent boots as the first one does) whose restores copy every page first.
	if opts.StateDir, err = os.MkdirTemp("", "agentplane-bench-checkpoint-full-"); err != nil {
		return err
	}
	defer os.RemoveAll(opts.StateDir)
	opts.Templates, opts.EagerRestore = false, true
	full, err := local.New(opts)
	if err != nil {
		return err
	}
	defer func() { _ = full.Shutdown(context.Background()) }()
	if err := rt.WarmCompileCache(ctx, version); err != nil {
		return err
	}
	fmt.Printf("engine %s in %s, CRIU %s; %d rounds, idle %s\n", version, engineDir, criu, n, idle)
	ag := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: "agent"}}
	d := runtime.Desired{EngineVersion: version, GatewayToken: "bench-token-0123456789abcdef"}
	for _, r := range []*local.Runtime{rt, full} {
		if _, err := waitRunning(ctx, r, ag, d); err != nil {
			return err
		}
	}
	got, err := suspendRounds(ctx, []mode{{"on demand", rt, true}, {"in full", full, true}, {"cold", rt, false}}, ag, d, n, idle)
	if err != nil {
		return err
	}
	c, inFull, cold := medians(got["on demand"]), medians(got["in full"]), medians(got["cold"])
	fmt.Printf("\nmedian  checkpointed, memory on demand: suspend %.2f s, resume to first exec %.2f s, checkpoint %.0f MiB\n", c.suspend, c.resume, c.imageMiB)
	fmt.Printf("median  checkpointed, memory in full:  suspend %.2f s, resume to first exec %.2f s\n", inFull.suspend, inFull.resume)
	fmt.Printf("median  cold:                          suspend %.2f s, resume to first exec %.2f s\n", cold.suspend, cold.resume)
	fmt.Printf("ratio checkpointed/cold: suspend %.3f, resume %.3f; resume on demand/in full %.3f\n",
		c.suspend/cold.suspend, c.resume/cold.resume, c.resume/inFull.resume)
	b, err := bornRounds(ctx, rt, version, n, idle)
	if err != nil {
		return err
	}
	fmt.Printf("median  born from the template: checkpoint %.0f MiB of its own plain, %.0f MiB packed, %.0f MiB whole; wake %.2f s plain, %.2f s packed\n",
		b.plain, b.packed, b.whole, b.plainWake, b.packedWake)
	return report.Write(*jsonOut, results(fmt.Sprintf("median of %d rounds, engine %s", n, version), c, inFull, cold, b))
}

// suspendRounds runs n rounds of a suspend and resume of the running agent ag in each mode
// (the same agent of each mode's runtime), the modes' order rotating, after idle each; it
// returns the samples by mode name.
func suspendRounds(ctx context.Context, modes []mode, ag *agentsv1.Agent, d runtime.Desired, n int, idle time.Duration) (map[string][]sample, error) {
	got := map[string][]sample{}
	for i := range n {
		for j := range modes {
			m := modes[(i+j)%len(modes)]
			if err := benchkit.Sleep(ctx, idle); err != nil {
				return nil, err
			}
			s, reason, err := cycle(ctx, m.rt, ag, d, m.ckpt)
			if err != nil {
				return nil, err
			}
			fmt.Printf("round %d  %-9s  suspend %.2f s  resume to first exec %.2f s  checkpoint %.0f MiB  RSS %.0f -> %.0f MiB  (%s)\n",
				i+1, m.name, s.suspend, s.resume, s.imageMiB, s.rssBefore, s.rssAfter, reason)
			got[m.name] = append(got[m.name], s)
		}
	}
	return got, nil
}

// mode is one way of a round's suspend and resume: checkpointed (ckpt) or cold, by the
// runtime rt (the shipped one, or the one that restores memory in full).
type mode struct {
	name string
	rt   *local.Runtime
	ckpt bool
}

// results are the rows of the run: row names its case.
func results(row string, c, inFull, cold sample, b born) []report.Result {
	const base, of = "the same agent suspended and resumed cold", "checkpointed / cold"
	const wholeBase = "the same checkpoint whole (neither thinned against its template nor compressed)"
	packed := fmt.Sprintf("CheckpointPackAfter %s (shipped: %s)", *packAfter, local.DefaultCheckpointPackAfter)
	return []report.Result{
		{Bench: "checkpoint", Row: row, Metric: "resume to first console exec", Value: c.resume, Unit: "s", Baseline: base, BaselineValue: cold.resume, Ratio: c.resume / cold.resume, RatioOf: of + "; target: at most 1 s"},
		{Bench: "checkpoint", Row: row, Metric: "resume to first console exec, the memory restored on demand", Value: c.resume, Unit: "s",
			Baseline: "the same, the memory restored in full before the gateway runs (EagerRestore)", BaselineValue: inFull.resume,
			Ratio: c.resume / inFull.resume, RatioOf: "on demand / in full; target: at most 0.5 s"},
		{Bench: "checkpoint", Row: row, Metric: "suspend", Value: c.suspend, Unit: "s", Baseline: base, BaselineValue: cold.suspend, Ratio: c.suspend / cold.suspend, RatioOf: of},
		{Bench: "checkpoint", Row: row, Metric: "checkpoint on disk, a gateway booted cold", Value: c.imageMiB, Unit: "MiB"},
		{Bench: "checkpoint", Row: row, Metric: "checkpoint on disk, an idle agent born from the template", Value: b.plain, Unit: "MiB",
			Baseline: wholeBase, BaselineValue: b.whole, Ratio: b.plain / b.whole, RatioOf: "thinned / whole; target: at most 64 MiB"},
		{Bench: "checkpoint", Row: row, Metric: "the same, once it slept CheckpointPackAfter (compressed)", Value: b.packed, Unit: "MiB",
			Baseline: wholeBase, BaselineValue: b.whole, Ratio: b.packed / b.whole, RatioOf: "thinned and compressed / whole; target: at most 64 MiB", Settings: packed},
		{Bench: "checkpoint", Row: row, Metric: "wake to first console exec, an agent born from the template, from its compressed checkpoint", Value: b.packedWake, Unit: "s",
			Baseline: "the same agents from their plain checkpoint", BaselineValue: b.plainWake, Ratio: b.packedWake / b.plainWake, RatioOf: "compressed / plain", Settings: packed},
	}
}

// born is what a round of bornRounds measured: the checkpoint's own disk plain (thinned),
// packed (thinned and compressed), the same checkpoint whole, in MiB, and the wake to the
// first exec from the plain and from the packed checkpoint, in seconds.
type born struct{ plain, packed, whole, plainWake, packedWake float64 }

// bornRounds waits for the engine's template, then n times makes a new agent born from it,
// lets it idle and suspends it (its checkpoint plain: thinned against the template) and
// wakes it, then lets it idle, suspends it and waits for its checkpoint's packing
// (CheckpointPackAfter) before it wakes it again. It returns the medians; each agent is
// deleted after its round.
func bornRounds(ctx context.Context, rt *local.Runtime, version string, n int, idle time.Duration) (born, error) {
	if _, err := benchkit.WaitTemplate(ctx, func() (bool, string) { return rt.TemplateReady(version) }); err != nil {
		return born{}, err
	}
	var got []born
	for i := range n {
		ag := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: fmt.Sprintf("born-%d", i)}}
		d := runtime.Desired{EngineVersion: version, GatewayToken: fmt.Sprintf("bench-born-token-%d-0123456789", i)}
		first, err := waitRunning(ctx, rt, ag, d)
		if err != nil {
			return born{}, err
		}
		if first.Reason != agentsv1.ReasonBornFromGatewayTemplate {
			return born{}, fmt.Errorf("agent %s was not born from the template: %s %s", ag.Name, first.Reason, first.Message)
		}
		var b born
		if b.plain, b.whole, b.plainWake, err = sleepAndWake(ctx, rt, ag, d, idle, false); err != nil {
			return born{}, err
		}
		if b.packed, _, b.packedWake, err = sleepAndWake(ctx, rt, ag, d, idle, true); err != nil {
			return born{}, err
		}
		fmt.Printf("born %d  checkpoint %.1f MiB of its own plain, %.1f MiB packed, %.0f MiB whole; wake to first exec %.2f s plain, %.2f s packed\n",
			i+1, b.plain, b.packed, b.whole, b.plainWake, b.packedWake)
		got = append(got, b)
		if err := rt.Delete(ctx, ag); err != nil {
			return born{}, err
		}
	}
	med := func(f func(born) float64) float64 { return benchkit.Median(got, f) }
	return born{
		plain: med(func(b born) float64 { return b.plain }), packed: med(func(b born) float64 { return b.packed }),
		whole: med(func(b born) float64 { return b.whole }), plainWake: med(func(b born) float64 { return b.plainWake }),
		packedWake: med(func(b born) float64 { return b.packedWake }),
	}, nil
}

// sleepAndWake lets the running agent idle, suspends it (when packed, waits until its
// checkpoint's pages are compressed) and wakes it: its checkpoint's own disk and whole, in
// MiB, and the wake to the first exec, in seconds.
func sleepAndWake(ctx context.Context, rt *local.Runtime, ag *agentsv1.Agent, d runtime.Desired, idle time.Duration, packed bool) (own, whole, wake float64, err error) {
	if err := benchkit.Sleep(ctx, idle); err != nil {
		return 0, 0, 0, err
	}
	sd := d
	sd.Stopped, sd.Suspended = true, true
	if o, err := rt.Ensure(ctx, ag, sd); err != nil || o.Phase != runtime.PhaseStopped {
		return 0, 0, 0, fmt.Errorf("suspend %s: %v %+v", ag.Name, err, o)
	}
	dir := filepath.Join(rt.AgentDir(ktypes.NamespacedName{Namespace: ag.Namespace, Name: ag.Name}), "checkpoint")
	for start := time.Now(); packed; {
		plain, _ := filepath.Glob(filepath.Join(dir, "pages-*.img"))
		zst, _ := filepath.Glob(filepath.Join(dir, "pages-*.img.zst"))
		if len(plain) == 0 && len(zst) > 0 {
			break
		}
		if time.Since(start) > *packAfter+5*time.Minute {
			return 0, 0, 0, fmt.Errorf("the checkpoint of %s was not packed (see the runtime's log)", ag.Name)
		}
		if err := benchkit.Sleep(ctx, 100*time.Millisecond); err != nil {
			return 0, 0, 0, err
		}
	}
	o, w, err := local.CheckpointSize(dir)
	if err != nil || o == 0 {
		return 0, 0, 0, fmt.Errorf("the checkpoint of %s: %v (%d bytes; see the runtime's log)", ag.Name, err, o)
	}
	start := time.Now()
	first, err := waitRunning(ctx, rt, ag, d)
	if err != nil {
		return 0, 0, 0, err
	}
	if first.Reason != agentsv1.ReasonRestoredFromCheckpoint {
		return 0, 0, 0, fmt.Errorf("agent %s was not restored: %s %s", ag.Name, first.Reason, first.Message)
	}
	if res, err := rt.Exec(ctx, ag, runtime.ExecRequest{Argv: []string{"true"}}); err != nil || res.ExitCode != 0 {
		return 0, 0, 0, fmt.Errorf("exec: %v %+v", err, res)
	}
	return float64(o) / (1 << 20), float64(w) / (1 << 20), time.Since(start).Seconds(), nil
}

// cycle suspends the running agent (checkpointed or plainly stopped) and resumes it.
func cycle(ctx context.Context, rt *local.Runtime, ag *agentsv1.Agent, d runtime.Desired, ckpt bool) (sample, string, error) {
	key := ktypes.NamespacedName{Namespace: ag.Namespace, Name: ag.Name}
	home := filepath.Join(rt.AgentDir(key), "home")
	s := sample{rssBefore: benchkit.AgentRSS(benchkit.HomeIs(home))}
	sd := d
	sd.Stopped, sd.Suspended = true, ckpt
	start := time.Now()
	if o, err := rt.Ensure(ctx, ag, sd); err != nil || o.Phase != runtime.PhaseStopped {
		return s, "", fmt.Errorf("suspend: %v %+v", err, o)
	}
	s.suspend = time.Since(start).Seconds()
	own, _, _ := local.CheckpointSize(filepath.Join(rt.AgentDir(key), "checkpoint"))
	s.imageMiB = float64(own) / (1 << 20)
	if ckpt && s.imageMiB == 0 {
		return s, "", errors.New("no checkpoint was taken (see the runtime's log)")
	}
	start = time.Now()
	first, err := waitRunning(ctx, rt, ag, d)
	if err != nil {
		return s, "", err
	}
	res, err := rt.Exec(ctx, ag, runtime.ExecRequest{Argv: []string{"true"}})
	if err != nil || res.ExitCode != 0 {
		return s, "", fmt.Errorf("exec: %v %+v", err, res)
	}
	s.resume = time.Since(start).Seconds()
	s.rssAfter = benchkit.AgentRSS(benchkit.HomeIs(home))
	return s, first.Reason, nil
}

// waitRunning calls Ensure until the gateway runs; it returns the first observation.
func waitRunning(ctx context.Context, rt *local.Runtime, ag *agentsv1.Agent, d runtime.Desired) (runtime.Observed, error) {
	start := time.Now()
	var first runtime.Observed
	for i := 0; ; i++ {
		o, err := rt.Ensure(ctx, ag, d)
		if err != nil {
			return first, err
		}
		if i == 0 {
			first = o
		}
		if o.Phase == runtime.PhaseRunning {
			return first, nil
		}
		if o.Phase == runtime.PhaseCrashed || time.Since(start) > 3*time.Minute {
			return first, fmt.Errorf("gateway not running: %s %s", o.Reason, o.Message)
		}
		if err := benchkit.Sleep(ctx, 20*time.Millisecond); err != nil {
			return first, err
		}
	}
}

func medians(s []sample) sample {
	med := func(f func(sample) float64) float64 { return benchkit.Median(s, f) }
	return sample{
		suspend: med(func(x sample) float64 { return x.suspend }), resume: med(func(x sample) float64 { return x.resume }),
		imageMiB: med(func(x sample) float64 { return x.imageMiB }),
	}
}
