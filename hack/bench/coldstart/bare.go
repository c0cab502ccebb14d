package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/agentplane/agentplane/hack/bench/internal/benchkit"
)

// bareMarker marks the bare engine's processes (its workers and child processes inherit it).
const bareMarker = "AGENTPLANE_BENCH_BARE_HOME"

// bare starts the engine by hand the way its docs start it (`openclaw gateway`, with
// --allow-unconfigured for a home without config) with its defaults: a fresh HOME, no config,
// nothing of this process's environment but PATH (the engine's bin dir first) and LANG. In a
// container OpenClaw binds to 0.0.0.0 by default and refuses that without auth, so it gets a
// token through OPENCLAW_GATEWAY_TOKEN (what its refusal asks for). It measures the time to
// the first `{"ready":true}` of /readyz, then the idle usage after idle, and stops it.
func bare(ctx context.Context, engineDir string, idle time.Duration) (sample, error) {
	home, err := os.MkdirTemp("", "agentplane-bench-bare-")
	if err != nil {
		return sample{}, err
	}
	defer os.RemoveAll(home)
	port, err := freePort()
	if err != nil {
		return sample{}, err
	}
	marker := bareMarker + "=" + home
	defer killMarked(marker)
	logf, err := os.Create(filepath.Join(home, "gateway.log"))
	if err != nil {
		return sample{}, err
	}
	defer logf.Close()
	defer keepLog("bare", logf.Name())
	cmd := exec.Command(filepath.Join(engineDir, "bin", "openclaw"), "gateway", "--allow-unconfigured", "--port", strconv.Itoa(port))
	cmd.Dir = home
	cmd.Env = []string{
		"PATH=" + filepath.Join(engineDir, "bin") + ":/usr/local/bin:/usr/bin:/bin",
		"LANG=C.UTF-8",
		"HOME=" + home,
		"OPENCLAW_GATEWAY_TOKEN=" + randomToken(),
		marker,
	}
	for k, v := range traceEnv() {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return sample{}, err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	defer stopBare(cmd, exited, marker)
	url := fmt.Sprintf("http://127.0.0.1:%d/readyz", port)
	for !readyz(ctx, url) {
		select {
		case <-ctx.Done():
			return sample{}, ctx.Err()
		case <-exited:
			return sample{}, fmt.Errorf("the bare engine exited (log: %s)", tail(logf.Name()))
		case <-time.After(pollEvery):
		}
		if time.Since(start) > startLimit {
			return sample{}, fmt.Errorf("the bare engine was not ready within %s", startLimit)
		}
	}
	s := sample{ready: time.Since(start).Seconds(), bootCPU: measure(marker).cpuSec}
	if err := benchkit.Sleep(ctx, idle); err != nil {
		return sample{}, err
	}
	s.idle = measure(marker)
	return s, nil
}

// stopBare stops the bare engine as a supervisor would (SIGTERM to its process group, SIGKILL
// after 15 s) and kills whatever of it is left (its spawn broker is in a session of its own).
func stopBare(cmd *exec.Cmd, exited <-chan struct{}, marker string) {
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(15 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
	for range 50 {
		if killMarked(marker) == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

var probeClient = &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}

// readyz reports whether url answers {"ready":true} (the engine's readiness, as the engine's
// own startup benchmark reads it; unknown paths answer 200 too, so the body counts).
func readyz(ctx context.Context, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := probeClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var r struct {
		Ready bool `json:"ready"`
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode == http.StatusOK && json.Unmarshal(body, &r) == nil && r.Ready
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tail is the end of a log file, for an error message.
func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 600 {
		b = b[len(b)-600:]
	}
	return string(b)
}
