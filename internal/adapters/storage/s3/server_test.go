package s3_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/devtools/testenv"
)

// The tests run against a real S3-compatible server: versitygw with its posix
// backend, pinned in hack/tools/s3server and built by hack/build-s3server.sh
// into a cache directory (about a minute the first time). AGENTPLANE_S3SERVER
// may name an already built versitygw binary instead.

const (
	accessKey = "agentplane-test"
	secretKey = "agentplane-test-secret"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// serverBinary returns the versitygw binary, building it if needed. It fails
// the test (never skips) when the binary cannot be had.
func serverBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		if p := os.Getenv("AGENTPLANE_S3SERVER"); p != "" {
			binPath = p
			return
		}
		script, err := filepath.Abs(filepath.Join("..", "..", "..", "..", "hack", "build-s3server.sh"))
		if err != nil {
			binErr = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		defer cancel()
		var stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, "bash", script)
		cmd.Stderr = &stderr
		start := time.Now()
		out, err := cmd.Output()
		if err != nil {
			binErr = fmt.Errorf("%s failed after %v: %w\n%s", script, time.Since(start).Round(time.Second), err, stderr.String())
			return
		}
		binPath = strings.TrimSpace(string(out))
	})
	if binErr != nil {
		t.Fatalf("cannot build the S3 test server (versitygw): %v", binErr)
	}
	if fi, err := os.Stat(binPath); err != nil || fi.Mode()&0o111 == 0 {
		t.Fatalf("S3 test server binary %q is not executable: %v", binPath, err)
	}
	return binPath
}

// server is a running versitygw process.
type server struct {
	t    *testing.T
	bin  string
	addr string // 127.0.0.1:port
	data string // posix backend root; each bucket is a directory
	cmd  *exec.Cmd
	log  *testenv.SyncBuffer
	done chan struct{}
}

// startServer starts versitygw on a free loopback port with a temp data dir.
func startServer(t *testing.T) *server {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	s := &server{t: t, bin: serverBinary(t), addr: addr, data: t.TempDir()}
	s.start()
	t.Cleanup(s.stop)
	return s
}

func (s *server) start() {
	s.t.Helper()
	s.log = &testenv.SyncBuffer{}
	s.cmd = exec.Command(s.bin, "--port", s.addr, "--quiet", "posix", s.data)
	s.cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+accessKey, "ROOT_SECRET_KEY="+secretKey)
	s.cmd.Stdout = s.log
	s.cmd.Stderr = s.log
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("starting %s: %v", s.bin, err)
	}
	s.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) {
		_ = cmd.Wait()
		close(done)
	}(s.cmd, s.done)

	deadline := time.Now().Add(testenv.EventBound)
	for {
		select {
		case <-s.done:
			s.t.Fatalf("versitygw exited during startup:\n%s", s.log.String())
		default:
		}
		c, err := net.DialTimeout("tcp", s.addr, 200*time.Millisecond)
		if err == nil {
			_ = c.Close()
			return
		}
		if time.Now().After(deadline) {
			s.stop()
			s.t.Fatalf("versitygw did not listen on %s within %s:\n%s", s.addr, testenv.EventBound, s.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop terminates the server (SIGTERM, then SIGKILL) and waits for it.
func (s *server) stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	select {
	case <-s.done:
	default:
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.done
		}
	}
	s.cmd = nil
}
