package localcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// proc is one component of the cluster, started directly (no wrapper shell) in its own
// process group, so its PID is the component's and a stop reaches its children.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// start runs bin args with its output appended to logDir/name.log and its PID recorded in
// pidDir/name.pid.
func start(name, bin string, args []string, logDir, pidDir string) (*proc, error) {
	return startEnv(name, bin, args, nil, logDir, pidDir)
}

// startEnv is start with env added to (or overriding) this process's environment.
func startEnv(name, bin string, args, env []string, logDir, pidDir string) (*proc, error) {
	logf, err := os.OpenFile(filepath.Join(logDir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	_ = os.WriteFile(filepath.Join(pidDir, name+".pid"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o600)
	go func() {
		p.err = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	return p, nil
}

// exited tells whether p has exited.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to p's process group and SIGKILL after grace.
func (p *proc) stop(grace time.Duration) {
	if p == nil || p.exited() {
		return
	}
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.done
	}
	// Anything of its group still alive (a child that ignored SIGTERM) goes too.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// waitFor polls check every 200 ms until it succeeds, p exits, or timeout passes.
func waitFor(ctx context.Context, what string, timeout time.Duration, p *proc, check func() error) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		if last = check(); last == nil {
			return nil
		}
		if p != nil && p.exited() {
			return fmt.Errorf("%s: %s exited (%v); see its log", what, p.name, p.err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %s: %w", what, timeout, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// freePort is a TCP port free on host right now.
func freePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// run runs a short command and returns its combined output.
func run(ctx context.Context, bin string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %v: %w: %s", bin, args, err, out)
	}
	return string(out), nil
}

// nodeIP is the machine's first non-loopback IPv4 address (kubelet refuses loopback).
func nodeIP() (string, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return "", err
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String(), nil
		}
	}
	return "", errors.New("local cluster: the machine has no non-loopback IPv4 address for the node")
}
