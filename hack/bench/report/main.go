// Command report runs agentplane's benchmarks and writes docs/BENCHMARKS.md's tables from
// their results (`make bench`):
//
//	go run ./hack/bench/report                  # every benchmark, then the tables
//	go run ./hack/bench/report -only snapshot,cid
//	go run ./hack/bench/report -render          # only the tables, from docs/bench/results.json
//	go run ./hack/bench/report -list
//
// Each benchmark measures its baseline in the same run and is run with the binaries' shipped
// defaults (a row that needs other settings says so). The results of a run replace that
// benchmark's rows in docs/bench/results.json, dated; the others keep theirs. Benchmarks that
// start a local cluster (realnode, kwok) need root; without it they are left out and say so.
// A benchmark that fails stops nothing else: its old rows stay, and the run exits non-zero.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentplane/agentplane/hack/bench/internal/report"
)

const (
	resultsFile = "docs/bench/results.json"
	docFile     = "docs/BENCHMARKS.md"
)

func main() {
	only := flag.String("only", "", "comma-separated benchmarks to run (default: all)")
	render := flag.Bool("render", false, "run nothing: rewrite the tables from "+resultsFile)
	list := flag.Bool("list", false, "list the benchmarks and their commands")
	flag.Parse()
	if *list {
		for _, b := range benches {
			fmt.Printf("%-18s %s\n", b.Name, b.Command)
		}
		return
	}
	if err := run(*only, *render); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
}

func run(only string, renderOnly bool) error {
	if _, err := os.Stat("go.mod"); err != nil {
		return fmt.Errorf("run from the repository's root: %w", err)
	}
	old, err := report.Read(resultsFile)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	var failed, skipped []string
	if !renderOnly {
		if old, failed, skipped, err = runBenches(only, old); err != nil {
			return err
		}
	}
	if err := renderDoc(old); err != nil {
		return err
	}
	// A benchmark that did not run is not a pass: the run says which and why, and fails.
	var errs []string
	if len(failed) > 0 {
		errs = append(errs, "failed: "+strings.Join(failed, ", "))
	}
	if len(skipped) > 0 {
		errs = append(errs, "skipped (their previous rows stay): "+strings.Join(skipped, ", "))
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// runBenches runs the benchmarks named in only (comma-separated; all when empty), merging
// each one's results into old and writing them to resultsFile as it goes; it returns the
// results, the benchmarks that failed and those skipped (with why).
func runBenches(only string, old []report.Result) (_ []report.Result, failed, skipped []string, _ error) {
	var wanted []string
	if only != "" {
		wanted = strings.Split(only, ",")
		for _, w := range wanted {
			if !slices.ContainsFunc(benches, func(b bench) bool { return b.Name == w }) {
				return nil, nil, nil, fmt.Errorf("no benchmark %q (-list)", w)
			}
		}
	}
	logs, err := os.MkdirTemp("", "agentplane-bench-")
	if err != nil {
		return nil, nil, nil, err
	}
	fmt.Printf("logs in %s\n", logs)
	for _, b := range benches {
		if len(wanted) > 0 && !slices.Contains(wanted, b.Name) {
			continue
		}
		if b.root && os.Geteuid() != 0 {
			fmt.Printf("== %s: skipped, needs root (%s)\n", b.Name, b.Command)
			skipped = append(skipped, b.Name+" (needs root)")
			continue
		}
		if b.input != "" && os.Getenv(b.input) == "" {
			fmt.Printf("== %s: skipped, needs $%s (%s); its previous rows stay\n", b.Name, b.input, b.Command)
			skipped = append(skipped, b.Name+" (needs $"+b.input+")")
			continue
		}
		fmt.Printf("== %s: %s\n", b.Name, b.Command)
		start := time.Now()
		rs, err := b.run(filepath.Join(logs, b.Name))
		if err != nil {
			fmt.Printf("== %s FAILED after %s: %v (its previous rows stay)\n", b.Name, time.Since(start).Round(time.Second), err)
			failed = append(failed, b.Name)
			continue
		}
		b.stamp(rs)
		fmt.Printf("== %s: %d results in %s\n", b.Name, len(rs), time.Since(start).Round(time.Second))
		old = report.Merge(old, rs)
		if err := report.Write(resultsFile, old); err != nil {
			return nil, nil, nil, err
		}
	}
	return old, failed, skipped, nil
}

// stamp gives the benchmark's results its name, today's date and its command where they
// have none.
func (b bench) stamp(rs []report.Result) {
	date := time.Now().UTC().Format(time.DateOnly)
	for i := range rs {
		rs[i].Bench = b.Name
		if rs[i].Date == "" {
			rs[i].Date = date
		}
		if rs[i].Command == "" {
			rs[i].Command = b.Command
		}
	}
}

// renderDoc rewrites docFile's tables from results.
func renderDoc(results []report.Result) error {
	doc, err := os.ReadFile(docFile)
	if err != nil {
		return err
	}
	descs := make([]report.Bench, len(benches))
	for i, b := range benches {
		descs[i] = b.Bench
		descs[i].Needs = b.needs()
	}
	out, err := report.Splice(string(doc), report.Render(descs, results))
	if err != nil {
		return fmt.Errorf("%s: %w", docFile, err)
	}
	if err := os.WriteFile(docFile, []byte(out), 0o644); err != nil {
		return err
	}
	fmt.Printf("wrote %s from %s\n", docFile, resultsFile)
	return nil
}

// bench is one benchmark: its description and how to run it into results.
type bench struct {
	report.Bench
	root bool
	// input, when set, names the environment variable that gives the benchmark an input this
	// repository cannot provide (a checkout of another project); without it the benchmark is
	// left out. Its args may name it as $VAR.
	input string
	// args is `go run`'s program and flags (the program writes -json); or, for a Go
	// benchmark, goTest is `go test`'s arguments and results turns its metrics into rows.
	args    []string
	goTest  []string
	results func(map[string]map[string]float64) ([]report.Result, error)
}

// needs is what a run of b needs beyond this repository ("" when nothing).
func (b bench) needs() string {
	var n []string
	if b.root {
		n = append(n, "root")
	}
	if b.input != "" {
		n = append(n, "$"+b.input+" (a checkout the repository does not hold)")
	}
	return strings.Join(n, " and ")
}

// run runs the benchmark with its output to the console and to log.
func (b bench) run(log string) ([]report.Result, error) {
	f, err := os.Create(log + ".log")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := io.MultiWriter(os.Stdout, f)
	if b.goTest != nil {
		cmd := exec.Command("go", append([]string{"test"}, b.goTest...)...)
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("go test: %w (log %s.log)", err, log)
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return nil, err
		}
		metrics, err := report.ParseGoBench(f)
		if err != nil {
			return nil, err
		}
		return b.results(metrics)
	}
	jsonPath := log + ".json"
	args := make([]string, len(b.args))
	for i, a := range b.args {
		args[i] = os.ExpandEnv(a)
	}
	cmd := exec.Command("go", append(append([]string{"run"}, args...), "-json", jsonPath)...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go run: %w (log %s.log)", err, log)
	}
	rs, err := report.Read(jsonPath)
	if err == nil && len(rs) == 0 {
		err = fmt.Errorf("%s: no results", jsonPath)
	}
	return rs, err
}
