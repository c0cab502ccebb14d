package monitoring_test

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The PrometheusRule's groups pass `promtool check rules` (expressions, durations, the
// annotation templates), and `promtool test rules` runs testdata/alerts_test.yaml against them.
func TestAlertRules(t *testing.T) {
	bin := promtool(t)
	dir := t.TempDir()

	full := filepath.Join(dir, "check", "rules.yaml")
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	writeRules(t, full, ruleGroups(t))
	out := run(t, bin, "check", "rules", full)
	if !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool check rules: %s", out)
	}

	// The unit tests compare labels only: the annotations (checked above) are left out.
	groups := ruleGroups(t)
	for _, g := range groups {
		for _, r := range g["rules"].([]any) {
			delete(r.(map[string]any), "annotations")
		}
	}
	writeRules(t, filepath.Join(dir, "rules.yaml"), groups)
	raw, err := os.ReadFile(filepath.Join("testdata", "alerts_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	tests := filepath.Join(dir, "alerts_test.yaml")
	if err := os.WriteFile(tests, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	out = run(t, bin, "test", "rules", tests)
	if !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool test rules: %s", out)
	}
}

// Every alert has unit tests where it fires and where it does not, a severity, and the
// annotations an on-call person reads: summary, description and runbook.
func TestEveryAlertIsTestedAndDocumented(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "alerts_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var suite struct {
		Tests []struct {
			Name          string `json:"name"`
			AlertRuleTest []struct {
				Alertname string `json:"alertname"`
				ExpAlerts []any  `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(raw, &suite); err != nil {
		t.Fatal(err)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range suite.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	var alerts []string
	for _, r := range rules(t) {
		name := fmt.Sprint(r["alert"])
		alerts = append(alerts, name)
		if !fires[name] || !quiet[name] {
			t.Errorf("alert %s: a unit test where it fires: %v, where it does not: %v", name, fires[name], quiet[name])
		}
		labels, _ := r["labels"].(map[string]any)
		switch labels["severity"] {
		case "critical", "warning", "info":
		default:
			t.Errorf("alert %s: severity %v (want critical, warning or info)", name, labels["severity"])
		}
		ann, _ := r["annotations"].(map[string]any)
		for _, k := range []string{"summary", "description", "runbook"} {
			if s, _ := ann[k].(string); strings.TrimSpace(s) == "" {
				t.Errorf("alert %s: no %s annotation", name, k)
			}
		}
	}
	// The alerts the on-call brief asks for.
	want := []string{"AgentplaneManagerDown", "AgentplaneAgentsFailing", "AgentplaneProvisioningSlow",
		"AgentplaneStorageUnavailable", "AgentplaneDNSChecksFailing", "AgentplaneReconcileErrors",
		"AgentplaneAPIErrors", "AgentplaneGatewayPoolEmpty"}
	if !reflect.DeepEqual(alerts, want) {
		t.Errorf("alerts %v, want %v", alerts, want)
	}
}

// Every dashboard parses, each panel queries the dashboard's data source, and the expression
// scanner finds what the scrape test then checks.
func TestDashboards(t *testing.T) {
	exprs := dashboardExprs(t)
	if len(exprs) < 10 {
		t.Errorf("%d panels with queries, want one per series family (10 or more)", len(exprs))
	}
	got := metricNames(`histogram_quantile(0.9, sum by (route, le) (rate(agentplane_http_request_duration_seconds_bucket{job="agentplane", code=~"5.."}[$__rate_interval]))) / on (x) group_left up > 0.5 and absent(up{job="a"} == 1)`)
	if want := []string{"agentplane_http_request_duration_seconds_bucket", "up"}; !reflect.DeepEqual(got, want) {
		t.Errorf("metricNames: %v, want %v", got, want)
	}
	for n, where := range usedMetricNames(t) {
		if n != "up" && !strings.HasPrefix(n, "agentplane_") && !strings.HasPrefix(n, "controller_runtime_") {
			t.Errorf("%s (used by %v) is not one of agentplane's or controller-runtime's series", n, where)
		}
	}
}
