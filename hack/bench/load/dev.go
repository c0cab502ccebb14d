package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/agentplane/agentplane/hack/bench/internal/rss"
	"github.com/agentplane/agentplane/internal/devtools/devenv"
	"github.com/agentplane/agentplane/internal/devtools/fakeclaw"
	"github.com/agentplane/agentplane/internal/devtools/testenv"
	"github.com/agentplane/agentplane/internal/devtools/testenv/kubeenv"
)

// dev is a running `agentplane dev` process: the manager, controllers and REST facade in one
// process (its control plane and agents are its children), on a fresh state directory, with
// the fake engine.
type dev struct {
	cmd   *exec.Cmd
	dir   string
	url   string
	token string
	done  chan error
}

// startDev builds bin/agentplane into a temporary directory and starts `agentplane dev` with
// the fakeclaw engine, the envtest control-plane binaries and a random facade port.
func startDev() (*dev, error) {
	dir, err := os.MkdirTemp("", "bench-load")
	if err != nil {
		return nil, err
	}
	d := &dev{dir: dir, done: make(chan error, 1)}
	bin := filepath.Join(dir, "agentplane")
	build := exec.Command("go", "build", "-o", bin, "./cmd/agentplane")
	build.Dir = testenv.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		d.cleanup()
		return nil, fmt.Errorf("go build ./cmd/agentplane: %v\n%s", err, out)
	}
	engine, err := fakeclaw.EngineDir()
	if err != nil {
		d.cleanup()
		return nil, err
	}
	logFile, err := os.Create(filepath.Join(dir, "dev.log"))
	if err != nil {
		d.cleanup()
		return nil, err
	}
	d.cmd = exec.Command(bin, "dev", "--state-dir", filepath.Join(dir, "state"), "--control-plane-dir", kubeenv.AssetsDir(),
		"--engine-dir", engine, "--api-addr", "127.0.0.1:0",
		// The bench measures the facade's capacity: any -rate, not the rate limits.
		"--rate-limit-per-token", "0", "--rate-limit-per-address", "0")
	d.cmd.Stdout, d.cmd.Stderr = logFile, logFile
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.cmd.Start(); err != nil {
		d.cleanup()
		return nil, err
	}
	go func() { d.done <- d.cmd.Wait(); logFile.Close() }()
	if d.url, d.token, err = devenv.WaitEnvFile(filepath.Join(dir, "state"), 3*time.Minute, d.done); err != nil {
		d.stop()
		return nil, fmt.Errorf("%w; see its log in %s", err, logFile.Name())
	}
	return d, nil
}

// stop interrupts the process (it stops its agents and control plane), kills its process
// group if it has not exited within a minute, and removes the state directory.
func (d *dev) stop() {
	if d.cmd != nil && d.cmd.Process != nil {
		_ = d.cmd.Process.Signal(os.Interrupt)
		select {
		case <-d.done:
		case <-time.After(time.Minute):
			_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
			<-d.done
		}
	}
	d.cleanup()
}

func (d *dev) cleanup() { _ = os.RemoveAll(d.dir) }

// rssMiB is the resident set size of the dev process (the manager and facade).
func (d *dev) rssMiB() float64 { return rss.MiB(strconv.Itoa(d.cmd.Process.Pid)) }
