package kube

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
	"k8s.io/streaming/pkg/httpstream"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// execGrace is how long the client waits past the in-pod timeout before giving up itself.
const execGrace = 15 * time.Second

// Exec runs a command in the gateway container, in a directory of the workspace.
func (r *Runtime) Exec(ctx context.Context, agent *agentsv1.Agent, req runtime.ExecRequest) (runtime.ExecResult, error) {
	argv := req.Argv
	if req.Engine {
		argv = append(append([]string{}, r.opts.EngineCommand...), req.Argv...)
	}
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = runtime.DefaultExecTimeout
	}
	maxOut := req.MaxOutput
	if maxOut <= 0 {
		maxOut = runtime.DefaultMaxOutput
	}
	if req.StdinFile != nil {
		wrapped, err := runtime.WrapStdinFile(req.StdinFile, argv)
		if err != nil {
			return runtime.ExecResult{}, err
		}
		argv = wrapped
	}
	cmd, err := execCommand(r.workspace(), req.Dir, timeout, req.Env, argv)
	if err != nil {
		return runtime.ExecResult{}, err
	}
	pod, err := r.runningPod(ctx, agent)
	if err != nil {
		return runtime.ExecResult{}, err
	}
	var stdin io.Reader
	if req.Stdin != nil {
		stdin = bytes.NewReader(req.Stdin)
	}
	stdout, stderr := newCapped(maxOut), newCapped(maxOut)
	cctx, cancel := context.WithTimeout(ctx, timeout+execGrace)
	defer cancel()
	start := time.Now()
	err = r.exec(cctx, agent.Namespace, pod, cmd, stdin, stdout, stderr)
	code, err := exitCode(err)
	res := runtime.ExecResult{
		Stdout: stdout.Bytes(), Stderr: stderr.Bytes(),
		Truncated: stdout.Truncated() || stderr.Truncated(),
	}
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return res, ctx.Err()
	case cctx.Err() != nil:
		res.ExitCode, res.TimedOut = -1, true
		return res, nil
	default:
		return res, streamError(err)
	}
	if perr := pathError(code, res.Stderr); perr != nil {
		return runtime.ExecResult{}, perr
	}
	res.ExitCode = code
	// timeout(1) exits 124 after SIGTERM, 137 when it had to SIGKILL.
	res.TimedOut = (code == 124 || code == 137) && time.Since(start) >= timeout
	return res, nil
}

// run runs cmd in the agent's pod with stdout streamed to w and a capped stderr; it returns
// the exit code. Path check failures come back as runtime errors.
func (r *Runtime) run(ctx context.Context, agent *agentsv1.Agent, cmd []string, stdin io.Reader, w io.Writer) (int, []byte, error) {
	pod, err := r.runningPod(ctx, agent)
	if err != nil {
		return 0, nil, err
	}
	stderr := newCapped(64 << 10)
	code, err := exitCode(r.exec(ctx, agent.Namespace, pod, cmd, stdin, w, stderr))
	if err != nil {
		if ctx.Err() != nil {
			return 0, stderr.Bytes(), ctx.Err()
		}
		return 0, stderr.Bytes(), streamError(err)
	}
	if perr := pathError(code, stderr.Bytes()); perr != nil {
		return code, stderr.Bytes(), perr
	}
	return code, stderr.Bytes(), nil
}

// runningPod is the name of the agent's pod when its gateway container runs.
func (r *Runtime) runningPod(ctx context.Context, agent *agentsv1.Agent) (string, error) {
	pod := &corev1.Pod{}
	err := r.opts.APIReader.Get(ctx, types.NamespacedName{Namespace: agent.Namespace, Name: PodName(agent)}, pod)
	if apierrors.IsNotFound(err) {
		return "", runtime.ErrNotRunning
	}
	if err != nil && unreachable(err) {
		return "", fmt.Errorf("%w: get pod: %w", runtime.ErrUnavailable, err)
	}
	if err != nil {
		return "", fmt.Errorf("get pod: %w", err)
	}
	if !podRunning(pod, agent) {
		return "", runtime.ErrNotRunning
	}
	return pod.Name, nil
}

func podRunning(pod *corev1.Pod, agent *agentsv1.Agent) bool {
	return ownedPod(pod, agent) && gatewayRunning(pod)
}

// exitCode splits a command's own non-zero exit from a failure to run it.
func exitCode(err error) (int, error) {
	if err == nil {
		return 0, nil
	}
	var ee utilexec.ExitError
	if errors.As(err, &ee) && ee.Exited() {
		return ee.ExitStatus(), nil
	}
	return 0, err
}

// streamError maps a failed exec stream: a pod or container that is gone means the agent is
// not running.
func streamError(err error) error {
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%w: %v", runtime.ErrNotRunning, err)
	}
	msg := err.Error()
	for _, gone := range []string{"container not found", "does not have a host assigned",
		"cannot exec into a container", "is not valid for pod"} {
		if strings.Contains(msg, gone) {
			return fmt.Errorf("%w: %v", runtime.ErrNotRunning, err)
		}
	}
	// The API server could not reach the pod's kubelet (stopped, or its node unreachable):
	// it says so in the text of the upgrade's answer, not in a typed error.
	if unreachable(err) || strings.Contains(msg, "error dialing backend") {
		return fmt.Errorf("%w: %w", runtime.ErrUnavailable, err)
	}
	return fmt.Errorf("%w: %v", runtime.ErrExec, err)
}

// unreachable recognises an exec stream that failed because the API server (or the kubelet
// behind it) did not answer or refused for now, rather than the command failing.
func unreachable(err error) bool {
	var opErr *net.OpError
	switch {
	case errors.As(err, &opErr), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EHOSTUNREACH):
		return true
	case apierrors.IsServiceUnavailable(err), apierrors.IsServerTimeout(err), apierrors.IsTimeout(err),
		apierrors.IsTooManyRequests(err):
		return true
	}
	return false
}

// podExec streams cmd through the pods/exec subresource: WebSocket first, SPDY when the API
// server or a proxy on the way cannot upgrade to WebSocket.
func (r *Runtime) podExec(ctx context.Context, namespace, pod string, cmd []string, stdin io.Reader, stdout, stderr io.Writer) error {
	cs, err := r.clientset()
	if err != nil {
		return err
	}
	req := cs.CoreV1().RESTClient().Post().Namespace(namespace).Resource("pods").Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{
			Container: ContainerGateway,
			Command:   cmd,
			Stdin:     stdin != nil,
			Stdout:    true,
			Stderr:    true,
		}, scheme.ParameterCodec)
	spdyExec, err := remotecommand.NewSPDYExecutor(r.opts.RESTConfig, "POST", req.URL())
	if err != nil {
		return err
	}
	wsExec, err := remotecommand.NewWebSocketExecutor(r.opts.RESTConfig, "GET", req.URL().String())
	if err != nil {
		return err
	}
	ex, err := remotecommand.NewFallbackExecutor(wsExec, spdyExec, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return err
	}
	return ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: stdout, Stderr: stderr})
}

var errNoRESTConfig = errors.New("kube runtime: no REST config for pods/exec")

func (r *Runtime) clientset() (kubernetes.Interface, error) {
	r.csOnce.Do(func() {
		switch {
		case r.opts.RESTConfig == nil: // remotecommand needs it even with a Clientset
			r.csErr = errNoRESTConfig
		case r.opts.Clientset != nil:
			r.cs = r.opts.Clientset
		default:
			r.cs, r.csErr = kubernetes.NewForConfig(r.opts.RESTConfig)
		}
	})
	return r.cs, r.csErr
}

// capped keeps the first max bytes written to it and drops the rest, so a chatty command
// keeps running instead of blocking on a full stream.
type capped struct {
	mu        sync.Mutex
	buf       bytes.Buffer
	max       int
	truncated bool
}

func newCapped(max int) *capped { return &capped{max: max} }

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(p)
	if room := c.max - c.buf.Len(); len(p) > room {
		c.truncated = true
		p = p[:max(room, 0)]
	}
	c.buf.Write(p)
	return n, nil
}

// Bytes returns what was kept (a copy; never nil).
func (c *capped) Bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]byte{}, c.buf.Bytes()...)
}

// Truncated reports whether anything was dropped.
func (c *capped) Truncated() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.truncated
}
