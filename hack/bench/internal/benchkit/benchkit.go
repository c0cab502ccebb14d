// Package benchkit is what several benchmark programs share: the pinned engine, the memory of
// an agent's processes, a context-aware sleep and a REST caller with a bearer token.
package benchkit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentplane/agentplane/hack/bench/internal/rss"
	"github.com/agentplane/agentplane/internal/adapters/engine/openclaw"
	"github.com/agentplane/agentplane/internal/adapters/runtime/local"
	"github.com/agentplane/agentplane/internal/devtools/testenv"
)

// Engine is the pinned engine's dir ($AGENTPLANE_ENGINE_DIR, else hack/install-engine.sh's)
// and the version its CLI reports.
func Engine() (dir, version string, err error) {
	dir = os.Getenv("AGENTPLANE_ENGINE_DIR")
	if dir == "" {
		out, err := exec.Command(filepath.Join(testenv.RepoRoot(), "hack", "install-engine.sh"), "--print-dir").Output()
		if err != nil {
			return "", "", fmt.Errorf("install the engine (make engine): %w", err)
		}
		dir = strings.TrimSpace(string(out))
	}
	out, err := exec.Command(filepath.Join(dir, "bin", "openclaw"), "--version").Output()
	if err != nil {
		return "", "", err
	}
	version, err = openclaw.New().ParseVersion(out)
	return dir, version, err
}

// AgentRSS sums the resident memory (MiB) of every process whose environment names an agent
// home that match accepts: the gateway, its workers and children and, sandboxed, bwrap's.
func AgentRSS(match func(home string) bool) float64 {
	total := 0.0
	for _, pid := range AgentPIDs(match) {
		total += rss.MiB(pid)
	}
	return total
}

// GatewayRSS sums the resident memory (MiB) of agent id's gateway on a local runtime whose
// state dir is state: the process in its gateway.pid and every process under it. A gateway
// born from a template carries the template's home in its environment (restored with its
// memory), so AgentRSS's marker does not find it; its pid file does.
func GatewayRSS(state, id string) float64 {
	files, _ := filepath.Glob(filepath.Join(state, "agents", "*", id, "gateway.pid"))
	total := 0.0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for todo := []string{strings.TrimSpace(string(b))}; len(todo) > 0; todo = todo[1:] {
			total += rss.MiB(todo[0])
			kids, _ := filepath.Glob("/proc/" + todo[0] + "/task/*/children")
			for _, k := range kids {
				c, _ := os.ReadFile(k)
				todo = append(todo, strings.Fields(string(c))...)
			}
		}
	}
	return total
}

// AgentPIDs are the processes whose environment names an agent home that match accepts.
func AgentPIDs(match func(home string) bool) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil {
			continue
		}
		for _, kv := range strings.Split(string(env), "\x00") {
			// The local runtime's marker of a gateway (and of the engine's workers and
			// children, which inherit it): the agent's home.
			if home, ok := strings.CutPrefix(kv, local.MarkerEnv+"="); ok && match(home) {
				out = append(out, e.Name())
				break
			}
		}
	}
	return out
}

// HomeIs matches the agent whose home is home.
func HomeIs(home string) func(string) bool { return func(h string) bool { return h == home } }

// HomeOfAgent matches the agent whose id is a directory of its home's path.
func HomeOfAgent(id string) func(string) bool {
	return func(h string) bool { return strings.Contains(h+"/", "/"+id+"/") }
}

// Sleep waits d or until ctx ends.
func Sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// templateBound bounds the wait for the engine's template (about a minute here: a gateway's
// boot and its checkpoint).
const templateBound = 10 * time.Minute

// WaitTemplate waits until ready (a runtime's TemplateReady for the engine version, which
// starts a missing template) says the engine's template is ready, and returns how long that
// took: at most templateBound while it is being made, an error at once when it cannot be.
func WaitTemplate(ctx context.Context, ready func() (bool, string)) (time.Duration, error) {
	start := time.Now()
	for {
		ok, why := ready()
		switch {
		case ok:
			return time.Since(start), nil
		case !strings.Contains(why, "being made"):
			return 0, fmt.Errorf("the engine's template: %s", why)
		case time.Since(start) > templateBound:
			return 0, fmt.Errorf("the engine's template is not ready after %s: %s", templateBound, why)
		}
		if err := Sleep(ctx, 250*time.Millisecond); err != nil {
			return 0, err
		}
	}
}

// Client calls the REST facade at Base with a bearer Token.
type Client struct{ Base, Token string }

// Call sends body (JSON, nil for none) and returns the status and the answer's body.
func (c Client) Call(method, path string, body any) (int, []byte, error) {
	var rd *bytes.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(raw)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, err := http.NewRequest(method, c.Base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	return resp.StatusCode, buf.Bytes(), nil
}

// Median is the median of f over s (the mean of the middle two for an even count; 0 for none).
func Median[T any](s []T, f func(T) float64) float64 {
	if len(s) == 0 {
		return 0
	}
	v := make([]float64, len(s))
	for i := range s {
		v[i] = f(s[i])
	}
	slices.Sort(v)
	if len(v)%2 == 0 {
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return v[len(v)/2]
}

// Percentile is the nearest-rank q-th percentile of s (0 for none).
func Percentile(s []float64, q float64) float64 {
	if len(s) == 0 {
		return 0
	}
	v := slices.Sorted(slices.Values(s))
	return v[max(0, int(math.Ceil(q/100*float64(len(v))))-1)]
}

// KeepBusy gives agent id work every 2 s until ctx ends (a console exec writing, hashing and
// removing 1 MiB in its home, and a config read); a failed call ends it with the error.
func KeepBusy(ctx context.Context, c Client, id string) error {
	cmd := map[string]string{"command": "head -c 1048576 /dev/urandom > busy.bin && sha256sum busy.bin && rm busy.bin"}
	for ctx.Err() == nil {
		if status, body, err := c.Call("POST", "/v0/agents/"+id+"/console/exec", cmd); ctx.Err() == nil && (err != nil || status != 200) {
			return fmt.Errorf("exec: %d %v %s", status, err, body)
		}
		if status, body, err := c.Call("GET", "/v0/agents/"+id+"/config", nil); ctx.Err() == nil && (err != nil || status != 200) {
			return fmt.Errorf("config: %d %v %s", status, err, body)
		}
		_ = Sleep(ctx, 2*time.Second)
	}
	return nil
}

// MemAvailableMiB is /proc/meminfo's MemAvailable in MiB.
func MemAvailableMiB() float64 {
	return float64(ProcField("/proc/meminfo", "MemAvailable:")) / 1024
}

// ProcField is the first number after prefix on a line of a /proc file (0 when none).
func ProcField(path, prefix string) int64 {
	raw, _ := os.ReadFile(path)
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				v, _ := strconv.ParseInt(f[0], 10, 64)
				return v
			}
		}
	}
	return 0
}

// BinEnv sets env to the checkout's bin/<name> when env is unset and that file exists: `go
// run` runs a benchmark from a temporary dir, where the runtime's own default (beside its
// binary) finds nothing.
func BinEnv(env, name string) {
	if os.Getenv(env) != "" {
		return
	}
	if p, err := filepath.Abs(filepath.Join("bin", name)); err == nil {
		if _, err := os.Stat(p); err == nil {
			_ = os.Setenv(env, p)
		}
	}
}
