// Package monitoring_test tests config/monitoring against the platform: the alerting rules with
// promtool (check and unit tests of every alert), the Grafana dashboard's queries, the objects
// against a real API server with the Prometheus Operator's CRDs, and a scrape of a running
// platform's /metrics after a scenario through the REST door (every series the rules and the
// dashboard use is exported and moves).
package monitoring_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/agentplane/agentplane/internal/devtools/testenv"
)

// monitoringDir is config/monitoring of the checkout.
func monitoringDir() string { return filepath.Join(testenv.RepoRoot(), "config", "monitoring") }

// promtool is the promtool `make promtool` builds: $AGENTPLANE_PROMTOOL, else the checkout's
// bin/promtool. Without it the test skips, except under CI=true where it fails.
func promtool(t *testing.T) string {
	t.Helper()
	path := os.Getenv("AGENTPLANE_PROMTOOL")
	if path == "" {
		path = filepath.Join(testenv.RepoRoot(), "bin", "promtool")
	}
	if _, err := os.Stat(path); err != nil {
		testenv.Skip(t, "promtool missing at %s: run `make promtool`", path)
	}
	return path
}

// ruleGroups are the groups of config/monitoring/prometheusrule.yaml's spec, as a Prometheus
// rules file holds them.
func ruleGroups(t *testing.T) []map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(monitoringDir(), "prometheusrule.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var pr struct {
		Kind string `json:"kind"`
		Spec struct {
			Groups []map[string]any `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &pr); err != nil {
		t.Fatal(err)
	}
	if pr.Kind != "PrometheusRule" || len(pr.Spec.Groups) == 0 {
		t.Fatalf("prometheusrule.yaml: kind %q with %d groups", pr.Kind, len(pr.Spec.Groups))
	}
	return pr.Spec.Groups
}

// rules are every rule of the groups.
func rules(t *testing.T) []map[string]any {
	var out []map[string]any
	for _, g := range ruleGroups(t) {
		rs, _ := g["rules"].([]any)
		for _, r := range rs {
			out = append(out, r.(map[string]any))
		}
	}
	return out
}

// writeRules writes groups as a rules file.
func writeRules(t *testing.T, path string, groups []map[string]any) {
	t.Helper()
	raw, err := yaml.Marshal(map[string]any{"groups": groups})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
}

// run runs a command and fails the test with its output.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return string(out)
}

// dashboardExprs are the PromQL expressions of every panel of every dashboard, by dashboard
// file and panel title.
func dashboardExprs(t *testing.T) map[string][]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(monitoringDir(), "dashboards", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards in config/monitoring/dashboards (%v)", err)
	}
	out := map[string][]string{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			Title  string `json:"title"`
			UID    string `json:"uid"`
			Panels []struct {
				Type       string `json:"type"`
				Title      string `json:"title"`
				Datasource *struct {
					UID string `json:"uid"`
				} `json:"datasource"`
				Targets []struct {
					Expr string `json:"expr"`
				} `json:"targets"`
			} `json:"panels"`
		}
		if err := json.Unmarshal(raw, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if d.Title == "" || d.UID == "" {
			t.Errorf("%s: no title or uid", f)
		}
		for _, p := range d.Panels {
			if p.Type == "row" {
				continue
			}
			key := fmt.Sprintf("%s: %q", filepath.Base(f), p.Title)
			if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
				t.Errorf("%s: the panel's datasource is not the dashboard's ${datasource} variable", key)
			}
			if len(p.Targets) == 0 {
				t.Errorf("%s: no queries", key)
			}
			for _, tg := range p.Targets {
				if strings.TrimSpace(tg.Expr) == "" {
					t.Errorf("%s: an empty query", key)
				}
				out[key] = append(out[key], tg.Expr)
			}
		}
	}
	return out
}

var (
	// What is not a metric name in an expression: strings, label matchers, ranges, grouping
	// clauses, numbers and durations.
	promqlStrings  = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	promqlMatchers = regexp.MustCompile(`\{[^}]*\}`)
	promqlRanges   = regexp.MustCompile(`\[[^\]]*\]`)
	promqlGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promqlIdent    = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*(\s*\()?`)
	promqlKeywords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true,
		"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
		"inf": true, "nan": true}
)

// metricNames are the metric names an expression selects (its identifiers that are neither
// functions, aggregations, keywords nor inside matchers and grouping clauses).
func metricNames(expr string) []string {
	e := promqlStrings.ReplaceAllString(expr, `""`)
	e = promqlMatchers.ReplaceAllString(e, " ")
	e = promqlRanges.ReplaceAllString(e, " ")
	e = promqlGrouping.ReplaceAllString(e, " ")
	seen := map[string]bool{}
	for _, m := range promqlIdent.FindAllStringSubmatchIndex(e, -1) {
		if m[2] >= 0 {
			continue // a function or an aggregation: name(
		}
		if m[0] > 0 && (e[m[0]-1] >= '0' && e[m[0]-1] <= '9' || e[m[0]-1] == '.') {
			continue // the unit of a number or a duration (5m, 1e3)
		}
		id := e[m[0]:m[1]]
		if !promqlKeywords[strings.ToLower(id)] {
			seen[id] = true
		}
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// usedMetricNames are the metric names the alert rules and the dashboards use, with where.
func usedMetricNames(t *testing.T) map[string][]string {
	used := map[string][]string{}
	for _, r := range rules(t) {
		for _, n := range metricNames(fmt.Sprint(r["expr"])) {
			used[n] = append(used[n], fmt.Sprintf("alert %v", r["alert"]))
		}
	}
	for where, exprs := range dashboardExprs(t) {
		for _, e := range exprs {
			for _, n := range metricNames(e) {
				used[n] = append(used[n], "dashboard "+where)
			}
		}
	}
	return used
}
