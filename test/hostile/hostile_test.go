package hostile

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/devtools/testenv"
)

// Environment overrides.
const (
	envSeed   = "HOSTILE_SEED"   // replay a run (the seed is printed)
	envBudget = "HOSTILE_BUDGET" // requests per operation (default defaultBudget)
)

// defaultBudget is the number of requests per operation: every required kind of hostile input
// fits (the largest operation needs about 32), the rest is optional variants and mixtures.
const defaultBudget = 40

// maxReports bounds the failures reported per operation.
const maxReports = 8

// TestHostileInput sends a fixed budget of hostile requests to every operation of
// docs/openapi.json over HTTP and checks every answer (see checkAnswer), that no connection is
// dropped, and that /healthz still answers after each operation's batch.
func TestHostileInput(t *testing.T) {
	fix := platformFixture(t)
	ops := operations(t)
	// The run deletes the fixture's objects last: make new ones for the tests after it.
	t.Cleanup(func() {
		if err := fix.createObjects(); err != nil {
			t.Errorf("recreate the fixture objects: %v", err)
		}
	})
	seed, budget := envUint(t, envSeed, uint64(time.Now().UnixNano())), int(envUint(t, envBudget, defaultBudget))
	fmt.Fprintf(os.Stderr, "hostile: seed %d (%s=%d replays this run), %d requests per operation\n", seed, envSeed, seed, budget)
	client := &http.Client{
		Timeout:       90 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport:     &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 4},
	}
	start, total, documented500 := time.Now(), 0, 0
	for i, op := range ops {
		rng := rand.New(rand.NewPCG(seed, uint64(i)))
		reports, statuses := 0, map[int]int{}
		for _, a := range plan(op, fix, rng, budget) {
			total++
			ans, err := send(client, fix, op, a)
			statuses[ans.status]++
			if err == nil {
				err = checkAnswer(op, ans)
			}
			if err == nil && ans.status == http.StatusInternalServerError {
				documented500++
				t.Logf("%s [%s]: documented engine failure 500 %.200s", op, a.what, ans.body)
			}
			if err != nil {
				if reports++; reports <= maxReports {
					t.Errorf("%s [%s] (seed %d): %v", op, a.what, seed, err)
				}
			}
		}
		t.Logf("%s: statuses %v", op, statuses)
		if reports > maxReports {
			t.Errorf("%s: %d more failures not shown", op, reports-maxReports)
		}
		if err := healthy(client, fix); err != nil {
			t.Fatalf("after %s (seed %d): the server stopped answering: %v", op, seed, err)
		}
	}
	t.Logf("%d operations, %d requests, %d documented engine-failure 500s, %s", len(ops), total, documented500,
		time.Since(start).Round(time.Millisecond))
}

// send sends a over HTTP and reads the whole answer; an error means the connection was
// dropped or the answer cut short.
func send(client *http.Client, fix *fixture, op operation, a attempt) (answer, error) {
	req, err := http.NewRequest(op.Method, fix.base+"/", nil)
	if err != nil {
		return answer{}, err
	}
	// An opaque URL sends the escaped path exactly as written (no cleaning, no re-escaping).
	req.URL.Opaque = "//" + req.URL.Host + urlPath(op, fix, a.segs)
	req.URL.RawQuery = a.query
	if size := a.body.payload.size(); size > 0 || a.chunked {
		req.Body = io.NopCloser(a.body.payload.reader())
		req.ContentLength = size
		if a.chunked {
			req.ContentLength = -1
		}
	}
	for k, v := range a.header {
		req.Header[k] = v
	}
	if a.auth != nil {
		req.Header["Authorization"] = a.auth
	}
	if a.body.contentType != "" {
		req.Header.Set("Content-Type", a.body.contentType)
	}
	resp, err := client.Do(req)
	if err != nil {
		return answer{}, fmt.Errorf("no answer (dropped connection?): %w", err)
	}
	defer resp.Body.Close()
	raw, err := testenv.ReadAnswer(resp)
	if err != nil {
		return answer{}, fmt.Errorf("answer %d cut short: %w", resp.StatusCode, err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: raw}, nil
}

// healthy checks that GET /healthz answers 200 {"status":"ok"}.
func healthy(client *http.Client, fix *fixture) error {
	resp, err := client.Get(fix.base + "/healthz")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(raw), `"ok"`) {
		return fmt.Errorf("/healthz: %d %s", resp.StatusCode, raw)
	}
	return nil
}

// envUint reads an unsigned integer from the environment (def when unset).
func envUint(tb testing.TB, name string, def uint64) uint64 {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		tb.Fatalf("%s=%q: %v", name, v, err)
	}
	return n
}
