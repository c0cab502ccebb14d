// Command signature measures signature POST throughput through the REST facade against the
// same work done directly on the API server (Get + Update of the File), at the same
// concurrency, in the same run, on the envtest control plane. It prints both, their ratio and
// p50/p99 latencies.
//
//	go run ./hack/bench/signature -n 400 -c 8
package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/crypto"
	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/facade"
	"github.com/agentplane/agentplane/hack/bench/internal/report"
	"github.com/agentplane/agentplane/internal/adapters/eip712"
	"github.com/agentplane/agentplane/internal/adapters/storage/local"
	"github.com/agentplane/agentplane/internal/devtools/testenv/kubeenv"
	"github.com/agentplane/agentplane/internal/platform"
	"github.com/agentplane/agentplane/internal/rules/auth"
	"github.com/agentplane/agentplane/internal/rules/workspacens"
)

type file struct{ cid, date, id string }

// jsonOut is -json: where the results go for `make bench`.
var jsonOut *string

func main() {
	n := flag.Int("n", 400, "signatures per side")
	conc := flag.Int("c", 8, "concurrent clients")
	jsonOut = report.Flag()
	flag.Parse()
	ctrllog.SetLogger(logr.Discard())
	if err := run(*n, *conc); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(n, conc int) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	env, err := kubeenv.Start()
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	dir, err := os.MkdirTemp("", "bench-signature")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	base, tok, err := startFacade(ctx, env, dir)
	if err != nil {
		return err
	}
	key, _ := crypto.GenerateKey()
	addr := crypto.PubkeyToAddress(key.PublicKey).Hex()

	fmt.Printf("uploading %d files...\n", 2*n)
	all := make([]file, 0, 2*n)
	for i := range 2 * n {
		f, err := uploadFile(base, tok, fmt.Sprintf("bench file %d", i))
		if err != nil {
			return err
		}
		all = append(all, f)
	}
	viaFacade, direct := all[:n], all[n:]
	sigs := map[string]string{}
	for _, f := range all {
		sigs[f.cid] = sign(key, addr, f)
	}
	httpc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conc}}

	facadeLat, facadeWall, err := drive(conc, viaFacade, func(f file) error {
		return postSignature(ctx, httpc, base, tok, f.cid, sigs[f.cid], addr)
	})
	if err != nil {
		return fmt.Errorf("facade: %w", err)
	}
	c := env.Client
	directLat, directWall, err := drive(conc, direct, func(f file) error {
		obj := &agentsv1.File{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: "bench", Name: f.id}, obj); err != nil {
			return err
		}
		obj.Spec.Signature = &agentsv1.FileSignature{Address: addr, Signature: sigs[f.cid], SignedAt: metav1.Now()}
		return c.Update(ctx, obj)
	})
	if err != nil {
		return fmt.Errorf("direct: %w", err)
	}
	return writeResults(n, conc, facadeLat, directLat, facadeWall, directWall)
}

// startFacade starts the platform (its files in dir) on env and returns the REST facade's
// base URL and a files:write key of the workspace bench.
func startFacade(ctx context.Context, env *kubeenv.Env, dir string) (base, tok string, err error) {
	files, err := local.New(dir)
	if err != nil {
		return "", "", err
	}
	ready := make(chan string, 1)
	p, err := platform.New(ctx, env.Config, platform.Options{
		APIAddr: "127.0.0.1:0", MetricsAddr: "0", ProbeAddr: "0", Files: files, Log: logr.Discard(),
		APIReady: func(a string) { ready <- a },
		// The bench measures throughput at any -n and -c, not the rate limits.
		RateLimits: facade.NoRateLimits,
	})
	if err != nil {
		return "", "", err
	}
	go func() { _ = p.Start(ctx) }()
	base = "http://" + <-ready

	ws := &agentsv1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: "bench"}, Spec: agentsv1.WorkspaceSpec{
		Members: []agentsv1.WorkspaceMember{{UserID: "b", Role: agentsv1.RoleOwner}}}}
	if err := workspacens.EnsureWorkspace(ctx, env.Client, ws); err != nil {
		return "", "", err
	}
	tok, _, err = auth.CreateKey(ctx, env.Client, p.Signer, auth.KeyRequest{Workspace: "bench", UserID: "b", Scopes: []string{auth.ScopeFilesWrite}})
	if err != nil {
		return "", "", err
	}
	return base, tok, nil
}

// sign is addr's EIP-712 signature of f with key.
func sign(key *ecdsa.PrivateKey, addr string, f file) string {
	h, _ := eip712.Hash(addr, f.cid, f.date)
	s, _ := crypto.Sign(h, key)
	s[64] += 27
	return "0x" + hex.EncodeToString(s)
}

// postSignature POSTs the signature sig of addr to the file cid through the facade.
func postSignature(ctx context.Context, httpc *http.Client, base, tok, cid, sig, addr string) error {
	body, _ := json.Marshal(map[string]string{"signature": sig, "address": addr})
	req, _ := http.NewRequestWithContext(ctx, "POST", base+"/v3/files/public/signature/"+cid, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	resp, err := httpc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != 200 {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// writeResults prints both sides and their ratio and writes them to -json.
func writeResults(n, conc int, facadeLat, directLat []time.Duration, facadeWall, directWall time.Duration) error {
	ft := float64(n) / facadeWall.Seconds()
	dt := float64(n) / directWall.Seconds()
	fmt.Printf("signature POST, %d requests, concurrency %d\n", n, conc)
	fmt.Printf("  facade       %8.1f req/s   p50 %6.2f ms   p99 %6.2f ms\n", ft, pct(facadeLat, 50), pct(facadeLat, 99))
	fmt.Printf("  API server   %8.1f req/s   p50 %6.2f ms   p99 %6.2f ms   (Get + Update of the File)\n", dt, pct(directLat, 50), pct(directLat, 99))
	fmt.Printf("  ratio facade/direct throughput: %.2f\n", ft/dt)
	row := fmt.Sprintf("%d signatures, %d clients", n, conc)
	const apiWrite = "Get + Update of the File on the API server"
	return report.Write(*jsonOut, []report.Result{
		{Bench: "signature", Row: row, Metric: "throughput", Value: ft, Unit: "req/s", Baseline: apiWrite, BaselineValue: dt, Ratio: ft / dt, RatioOf: "facade / direct"},
		{Bench: "signature", Row: row, Metric: "p50 latency", Value: pct(facadeLat, 50), Unit: "ms", Baseline: apiWrite, BaselineValue: pct(directLat, 50), Ratio: pct(facadeLat, 50) / pct(directLat, 50), RatioOf: "facade / direct"},
		{Bench: "signature", Row: row, Metric: "p99 latency", Value: pct(facadeLat, 99), Unit: "ms", Baseline: apiWrite, BaselineValue: pct(directLat, 99), Ratio: pct(facadeLat, 99) / pct(directLat, 99), RatioOf: "facade / direct"},
	})
}

func drive(conc int, work []file, op func(file) error) ([]time.Duration, time.Duration, error) {
	lat := make([]time.Duration, len(work))
	next := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	start := time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				t := time.Now()
				if err := op(work[i]); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
				lat[i] = time.Since(t)
			}
		}()
	}
	for i := range work {
		next <- i
	}
	close(next)
	wg.Wait()
	return lat, time.Since(start), firstErr
}

func pct(d []time.Duration, p int) float64 {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return float64(s[(len(s)-1)*p/100].Microseconds()) / 1000
}

func uploadFile(base, tok, content string) (file, error) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, _ := mw.CreateFormFile("file", "f.txt")
	_, _ = fw.Write([]byte(content))
	_ = mw.WriteField("network", "public")
	_ = mw.Close()
	req, _ := http.NewRequest("POST", base+"/v3/files", &buf)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return file{}, err
	}
	defer resp.Body.Close()
	var out struct {
		Data struct {
			ID, CID   string
			CreatedAt string `json:"created_at"`
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
		return file{}, fmt.Errorf("upload: %d %v", resp.StatusCode, err)
	}
	return file{cid: out.Data.CID, date: out.Data.CreatedAt, id: out.Data.ID}, nil
}
