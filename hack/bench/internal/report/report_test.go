package report

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func TestMergeReplacesOnlyTheRerunBenchmarks(t *testing.T) {
	old := []Result{
		{Bench: "a", Row: "r1", Metric: "m", Value: 1, Date: "2026-11-01"},
		{Bench: "a", Row: "r2", Metric: "m", Value: 2, Date: "2026-11-01"},
		{Bench: "b", Row: "r1", Metric: "m", Value: 3, Date: "2026-11-01"},
	}
	fresh := []Result{
		{Bench: "c", Row: "r1", Metric: "m", Value: 9, Date: "2026-11-27"},
		{Bench: "a", Row: "r3", Metric: "m", Value: 4, Date: "2026-11-27"},
	}
	got := Merge(old, fresh)
	var keys []string
	for _, r := range got {
		keys = append(keys, r.Bench+"/"+r.Row+"/"+r.Date)
	}
	want := "a/r3/2026-11-27 b/r1/2026-11-01 c/r1/2026-11-27"
	if strings.Join(keys, " ") != want {
		t.Fatalf("merged %v, want %s: a rerun benchmark loses its old rows and keeps its place, the others keep theirs", keys, want)
	}
}

func TestWriteReadRejectsDishonestRows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.json")
	ok := []Result{{Bench: "a", Row: "r", Metric: "m", Value: 2, Unit: "s", Baseline: "direct", BaselineValue: 1, Ratio: 0.5}}
	if err := Write(path, ok); err != nil {
		t.Fatal(err)
	}
	back, err := Read(path)
	if err != nil || len(back) != 1 || back[0] != ok[0] {
		t.Fatalf("read back %+v, %v", back, err)
	}
	for name, r := range map[string]Result{
		"ratio without baseline": {Bench: "a", Row: "r", Metric: "m", Value: 1, Ratio: 2},
		"no metric":              {Bench: "a", Row: "r", Value: 1},
		"not a number":           {Bench: "a", Row: "r", Metric: "m", Value: zero() / zero()},
	} {
		if err := Write(path, []Result{r}); err == nil {
			t.Errorf("%s: written", name)
		}
	}
}

func zero() float64 { return 0 }

func TestRenderShowsEachRowWithItsBaselineAndDate(t *testing.T) {
	out := Render([]Bench{{Name: "agents", Title: "Agents", Command: "go run ./hack/bench/agents"}}, []Result{
		{Bench: "agents", Row: "500 agents", Metric: "wall time", Value: 13.6, Unit: "s", Baseline: "direct writes", BaselineValue: 1.97, Ratio: 0.1448, RatioOf: "direct / controller", Date: "2026-11-27"},
		{Bench: "agents", Row: "500 agents", Metric: "requests per agent", Value: 4.9, Settings: "--kube-api-qps 50", Date: "2026-11-27"},
		{Bench: "stray", Row: "x", Metric: "y", Value: 1234.4, Unit: "MiB", Date: "2026-11-26"},
	})
	for _, want := range []string{
		"### Agents", "`go run ./hack/bench/agents`",
		"| 500 agents | wall time | 13.6 s | direct writes: 1.97 s | **0.145** (direct / controller) | shipped defaults | 2026-11-27 |",
		"| 500 agents | requests per agent | 4.9 |  |  | --kube-api-qps 50 | 2026-11-27 |",
		"### stray", "| x | y | 1234 MiB |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("rendered table lacks %q:\n%s", want, out)
		}
	}
}

// A benchmark without rows keeps its section, which says it is not measured and what a run of
// it needs, instead of vanishing from the document.
func TestRenderSaysWhatIsNotMeasured(t *testing.T) {
	out := Render([]Bench{
		{Name: "measured", Title: "Measured", Command: "go run ./m"},
		{Name: "kwok", Title: "Kwok nodes", Command: "go run ./k (root)", Needs: "root"},
	}, []Result{{Bench: "measured", Row: "r", Metric: "m", Value: 1, Date: "2026-11-30"}})
	for _, want := range []string{"### Kwok nodes", "`go run ./k (root)`", "**Not measured yet**", "It needs root."} {
		if !strings.Contains(out, want) {
			t.Errorf("rendered document lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "Not measured yet") != 1 {
		t.Errorf("a measured benchmark is said to be unmeasured:\n%s", out)
	}
}

func TestSplice(t *testing.T) {
	doc := "# B\n\nintro\n" + BeginMarker + "\nold table\n" + EndMarker + "\nhistory\n"
	got, err := Splice(doc, "new table\n")
	if err != nil || got != "# B\n\nintro\n"+BeginMarker+"\nnew table\n"+EndMarker+"\nhistory\n" {
		t.Fatalf("%q %v", got, err)
	}
	if _, err := Splice("no markers", "x"); !errors.Is(err, ErrNoMarkers) {
		t.Fatalf("err %v", err)
	}
}

func TestParseGoBench(t *testing.T) {
	out := `goos: linux
BenchmarkCompute-2   	       5	  45412345 ns/op	1477.91 MB/s	1703.2 sha256-MB/s	1.152 x-sha256
BenchmarkRealNodeCreate  5  32535768174 ns/op  15.52 barepod-p50-s  18.09 create-p50-s  1.165 x-barepod
PASS
`
	got, err := ParseGoBench(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if got["BenchmarkCompute"]["x-sha256"] != 1.152 || got["BenchmarkCompute"]["MB/s"] != 1477.91 || got["BenchmarkRealNodeCreate"]["create-p50-s"] != 18.09 {
		t.Fatalf("%v", got)
	}
}
