// Command load runs a bounded mixed workload at a fixed rate against the REST facade and
// reports error rate, p50/p99 latency, throughput and the facade process's RSS.
//
//	go run ./hack/bench/load -rate 50 -duration 60s -repeats 3     # make bench-load
//
// The target is a real `agentplane dev` process (built from this tree) with the fakeclaw
// engine: the manager, controllers and facade run in that one process, so its RSS is the
// platform's alone — not the load generator's, which an in-process platform would share —
// and requests cross a real socket. Its control plane (kube-apiserver, etcd) and the agent's
// fake gateway are its children, not counted in the RSS.
//
// The mix (vegeta, constant rate): 30% GET /v0/agents, 30% GET /v0/agents/{id}, 20% console
// exec `echo`, 5% secret create, 5% secret list, and 10% /v3: upload, signature POST (a fresh
// EIP-712 signature of a file uploaded beforehand) and signature GET, a third each.
//
// The baseline, measured in the same run against the same process: plain GET /healthz (no
// token, no API-server read) at the same rate for the same duration. Each repeat prints its
// p99 over the baseline's. RSS is read before and after each repeat; the bound stated and
// checked (printed, never asserted) is that RSS after the last repeat exceeds RSS after the
// first by less than 20%: the mix adds secrets and files on every repeat, so some growth of
// the informer caches is expected, but not a leak's.
package main

import (
	"flag"
	"fmt"
	"math"
	"os"
	"sort"
	"time"

	"github.com/go-logr/logr"
	vegeta "github.com/tsenart/vegeta/v12/lib"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/agentplane/agentplane/hack/bench/internal/report"
)

// rssGrowthBound is the stated bound on RSS growth from the first repeat to the last.
const rssGrowthBound = 0.20

// warmup is a short, unreported run of the mix before the measurements.
const warmup = 5 * time.Second

func main() {
	rate := flag.Int("rate", 50, "requests per second (mix and baseline)")
	duration := flag.Duration("duration", 60*time.Second, "length of the baseline and of each repeat")
	repeats := flag.Int("repeats", 3, "runs of the mix")
	jsonOut = report.Flag()
	flag.Parse()
	ctrllog.SetLogger(logr.Discard())
	if *rate <= 0 || *duration <= 0 || *repeats <= 0 {
		fmt.Fprintln(os.Stderr, "error: -rate, -duration and -repeats must be positive")
		os.Exit(2)
	}
	if err := run(*rate, *duration, *repeats); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// jsonOut is -json: where the results go for `make bench`.
var jsonOut *string

func run(rate int, duration time.Duration, repeats int) error {
	fmt.Println("building and starting agentplane dev with the fake engine...")
	d, err := startDev()
	if err != nil {
		return err
	}
	defer d.stop()
	w := &workload{base: d.url, token: d.token}
	// Every signature POST needs a file of its own: 2/60 of all mix requests, warm-up included.
	total := float64(rate) * (warmup.Seconds() + duration.Seconds()*float64(repeats))
	signatures := int(math.Ceil(total*2/60)) + 10
	fmt.Printf("preparing: one agent, %d files to sign, 20 signed files...\n", signatures)
	if err := w.prepare(signatures); err != nil {
		return err
	}
	pace := vegeta.Rate{Freq: rate, Per: time.Second}
	fmt.Printf("warm-up: %s of the mix\n", warmup)
	attack(w.targeter(), pace, warmup)

	healthz := vegeta.NewStaticTargeter(vegeta.Target{Method: "GET", URL: d.url + "/healthz"})
	fmt.Printf("baseline: GET /healthz at %d/s for %s\n", rate, duration)
	base, _ := attack(healthz, pace, duration)
	printMetrics("healthz", base, nil)

	var rssAfter []float64
	var results []report.Result
	baseP99 := float64(base.Latencies.P99) / float64(time.Millisecond)
	for i := range repeats {
		before := d.rssMiB()
		fmt.Printf("\nrepeat %d/%d: mix at %d/s for %s\n", i+1, repeats, rate, duration)
		all, byKind := attack(w.targeter(), pace, duration)
		after := d.rssMiB()
		rssAfter = append(rssAfter, after)
		printMetrics("mix", all, byKind)
		fmt.Printf("  p99 mix / p99 healthz: %.1f   (%s / %s)\n",
			ratio(all.Latencies.P99, base.Latencies.P99), ms(all.Latencies.P99), ms(base.Latencies.P99))
		fmt.Printf("  facade process RSS: %.1f MiB before, %.1f MiB after\n", before, after)
		p99 := float64(all.Latencies.P99) / float64(time.Millisecond)
		results = append(results, report.Result{
			Bench: "load", Row: fmt.Sprintf("repeat %d of %d: mix at %d/s for %s, %.2f%% errors", i+1, repeats, rate, duration, (1-all.Success)*100),
			Metric: "p99 latency", Value: p99, Unit: "ms", Baseline: "GET /healthz at the same rate", BaselineValue: baseP99,
			Ratio: p99 / baseP99, RatioOf: "mix p99 / healthz p99",
		})
	}
	growth := (rssAfter[len(rssAfter)-1] - rssAfter[0]) / rssAfter[0]
	verdict := "within"
	if growth >= rssGrowthBound {
		verdict = "EXCEEDS"
	}
	fmt.Printf("\nRSS after repeat 1: %.1f MiB, after repeat %d: %.1f MiB: growth %+.1f%%, %s the bound (< %.0f%%)\n",
		rssAfter[0], repeats, rssAfter[len(rssAfter)-1], growth*100, verdict, rssGrowthBound*100)
	results = append(results, report.Result{
		Bench: "load", Row: fmt.Sprintf("facade RSS over %d repeats (bound: growth < %.0f%%)", repeats, rssGrowthBound*100),
		Metric: "RSS after the last repeat", Value: rssAfter[len(rssAfter)-1], Unit: "MiB",
		Baseline: "after the first repeat", BaselineValue: rssAfter[0], Ratio: rssAfter[len(rssAfter)-1] / rssAfter[0], RatioOf: "last / first",
	})
	return report.Write(*jsonOut, results)
}

// attack runs tr at pace for du and returns the metrics of all results and by request kind.
func attack(tr vegeta.Targeter, pace vegeta.Pacer, du time.Duration) (*vegeta.Metrics, map[string]*vegeta.Metrics) {
	a := vegeta.NewAttacker(vegeta.Timeout(30*time.Second), vegeta.Workers(8), vegeta.MaxWorkers(256),
		vegeta.KeepAlive(true), vegeta.Connections(64))
	all, byKind := &vegeta.Metrics{}, map[string]*vegeta.Metrics{}
	for res := range a.Attack(tr, pace, du, "load") {
		all.Add(res)
		k := kindOf(res.Method, res.URL)
		if byKind[k] == nil {
			byKind[k] = &vegeta.Metrics{}
		}
		byKind[k].Add(res)
	}
	all.Close()
	for _, m := range byKind {
		m.Close()
	}
	return all, byKind
}

// printMetrics prints a run's figures (and by kind, when given).
func printMetrics(name string, m *vegeta.Metrics, byKind map[string]*vegeta.Metrics) {
	fmt.Printf("  %-8s %6d requests  errors %5.2f%%  p50 %8s  p99 %8s  throughput %6.1f/s  statuses %v\n",
		name, m.Requests, (1-m.Success)*100, ms(m.Latencies.P50), ms(m.Latencies.P99), m.Throughput, m.StatusCodes)
	if len(m.Errors) > 0 {
		fmt.Printf("           errors: %.3q\n", m.Errors)
	}
	kinds := make([]string, 0, len(byKind))
	for k := range byKind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		km := byKind[k]
		fmt.Printf("    %-24s %6d  errors %5.2f%%  p50 %8s  p99 %8s  statuses %v\n",
			k, km.Requests, (1-km.Success)*100, ms(km.Latencies.P50), ms(km.Latencies.P99), km.StatusCodes)
	}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond)) }

func ratio(a, b time.Duration) float64 {
	if b <= 0 {
		return math.Inf(1)
	}
	return float64(a) / float64(b)
}
