package report

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Bench describes one benchmark of the report: how to run it and what its table is called.
type Bench struct {
	Name  string // the Result.Bench its results carry
	Title string
	// Command reproduces its rows (shown under the title).
	Command string
	// About says in a sentence what is measured against what.
	About string
	// Needs is what a run of it needs beyond this repository ("root", an input such as
	// $AGENTPLANE_PEER_SRC), said where it has no rows yet.
	Needs string
}

// Render writes the generated part of docs/BENCHMARKS.md: one table per benchmark of
// benches, in benches' order, each row with its value, its same-run baseline, the ratio and
// the date; a benchmark with no results yet says so (and what its run needs) in place of its
// table. Results of benchmarks benches does not list are shown last under their own names,
// so nothing measured is dropped silently.
func Render(benches []Bench, results []Result) string {
	var b strings.Builder
	byBench := map[string][]Result{}
	var unknown []string
	known := map[string]bool{}
	for _, d := range benches {
		known[d.Name] = true
	}
	for _, r := range results {
		if !known[r.Bench] && byBench[r.Bench] == nil {
			unknown = append(unknown, r.Bench)
		}
		byBench[r.Bench] = append(byBench[r.Bench], r)
	}
	for _, name := range unknown {
		benches = append(benches, Bench{Name: name, Title: name})
	}
	for _, d := range benches {
		rs := byBench[d.Name]
		fmt.Fprintf(&b, "\n### %s\n\n", d.Title)
		if d.About != "" {
			fmt.Fprintf(&b, "%s\n\n", d.About)
		}
		cmd := d.Command
		if len(rs) > 0 && rs[0].Command != "" {
			cmd = rs[0].Command
		}
		if cmd != "" {
			fmt.Fprintf(&b, "`%s`\n\n", cmd)
		}
		if len(rs) == 0 {
			needs := ""
			if d.Needs != "" {
				needs = " It needs " + d.Needs + "."
			}
			fmt.Fprintf(&b, "**Not measured yet**: no run of the command above has recorded its rows.%s\n", needs)
			continue
		}
		b.WriteString("| case | metric | result | baseline (same run) | ratio | settings | date |\n|---|---|---|---|---|---|---|\n")
		for _, r := range rs {
			baseline, ratio := "", ""
			if r.Baseline != "" {
				baseline = r.Baseline + ": " + Figure(r.BaselineValue, r.Unit)
			}
			if r.Baseline != "" {
				of := r.RatioOf
				if of == "" {
					of = "result / baseline"
				}
				ratio = fmt.Sprintf("**%s** (%s)", strconv.FormatFloat(round(r.Ratio, 3), 'f', -1, 64), of)
			}
			settings := r.Settings
			if settings == "" {
				settings = "shipped defaults"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n",
				cell(r.Row), cell(r.Metric), Figure(r.Value, r.Unit), cell(baseline), ratio, cell(settings), r.Date)
		}
	}
	b.WriteString("\n")
	return b.String()
}

// Figure formats a value with three significant digits at most (whole numbers from 100 on)
// and its unit.
func Figure(v float64, unit string) string {
	var s string
	switch a := math.Abs(v); {
	case a >= 100 || a == 0:
		s = strconv.FormatFloat(math.Round(v), 'f', -1, 64)
	default:
		s = strconv.FormatFloat(round(v, 3), 'f', -1, 64)
	}
	if unit == "" {
		return s
	}
	return s + " " + unit
}

// round keeps digits significant digits of v.
func round(v float64, digits int) float64 {
	if v == 0 {
		return 0
	}
	p := math.Pow(10, float64(digits)-math.Ceil(math.Log10(math.Abs(v))))
	return math.Round(v*p) / p
}

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// ParseGoBench reads `go test -bench` output: for each benchmark line, its name (without the
// -GOMAXPROCS suffix) and every "value unit" pair it reports (ns/op and custom metrics).
func ParseGoBench(r io.Reader) (map[string]map[string]float64, error) {
	out := map[string]map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue
		}
		name := f[0]
		if i := strings.LastIndex(name, "-"); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i]
			}
		}
		m := map[string]float64{}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("%s: %q is not a figure", name, f[i])
			}
			m[f[i+1]] = v
		}
		out[name] = m
	}
	return out, sc.Err()
}
