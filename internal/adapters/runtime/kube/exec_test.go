package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/devtools/testenv"
)

// podReader serves one pod (nil: none) to the runtime's pod lookups.
type podReader struct{ pod *corev1.Pod }

func (r podReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	p, ok := obj.(*corev1.Pod)
	if !ok || r.pod == nil || key.Name != r.pod.Name || key.Namespace != r.pod.Namespace {
		return apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, key.Name)
	}
	r.pod.DeepCopyInto(p)
	return nil
}

func (podReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("not supported")
}

func runningTestPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "a1-0", Namespace: "ws1",
			Labels: map[string]string{agentsv1.LabelAgent: "a1", agentsv1.LabelAppManagedBy: agentsv1.ManagedBy}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
			Name: ContainerGateway, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}},
	}
}

// localRuntime is a Runtime whose pod commands run on this host in the fixture's home.
func localRuntime(t *testing.T) (*Runtime, fixture) {
	f := newFixture(t)
	r := New(Options{Engine: stubEngine{}, APIReader: podReader{runningTestPod()},
		Client: fake.NewClientBuilder().WithObjects(runningTestPod()).Build()})
	r.home, r.exec = f.home, localExec
	return r, f
}

func TestExecResult(t *testing.T) {
	r, _ := localRuntime(t)
	res, err := r.Exec(context.Background(), testAgent(), runtime.ExecRequest{
		Argv: []string{"sh", "-c", `echo out; echo err >&2; exit 3`}})
	must(t, err)
	if string(res.Stdout) != "out\n" || string(res.Stderr) != "err\n" || res.ExitCode != 3 || res.TimedOut || res.Truncated {
		t.Errorf("result %+v", res)
	}
	// Exiting with the prologue's code is the command's own business.
	res, err = r.Exec(context.Background(), testAgent(), runtime.ExecRequest{Argv: []string{"sh", "-c", "exit 111"}})
	if err != nil || res.ExitCode != 111 {
		t.Errorf("exit 111: %+v %v", res, err)
	}
}

func TestExecDirEnvStdin(t *testing.T) {
	r, f := localRuntime(t)
	res, err := r.Exec(context.Background(), testAgent(), runtime.ExecRequest{
		Argv:  []string{"sh", "-c", `pwd -P; printf '%s\n' "$GREETING"; cat`},
		Dir:   "linkin",
		Env:   map[string]string{"GREETING": "hi $(there); `x`"},
		Stdin: []byte("from stdin"),
	})
	must(t, err)
	want := filepath.Join(f.ws, "sub") + "\nhi $(there); `x`\nfrom stdin"
	if string(res.Stdout) != want || res.ExitCode != 0 {
		t.Errorf("stdout %q (stderr %q), want %q", res.Stdout, res.Stderr, want)
	}
	for _, dir := range []string{"..", "linkout", "/etc", "missing"} {
		_, err := r.Exec(context.Background(), testAgent(), runtime.ExecRequest{Argv: []string{"true"}, Dir: dir})
		if !errors.Is(err, runtime.ErrInvalidPath) {
			t.Errorf("dir %q: %v", dir, err)
		}
	}
}

func TestExecEngine(t *testing.T) {
	r, _ := localRuntime(t)
	r.opts.EngineCommand = []string{"echo", "ENGINE"}
	res, err := r.Exec(context.Background(), testAgent(), runtime.ExecRequest{Engine: true, Argv: []string{"--version"}})
	must(t, err)
	if string(res.Stdout) != "ENGINE --version\n" {
		t.Errorf("stdout %q", res.Stdout)
	}
}

func TestExecMaxOutput(t *testing.T) {
	r, _ := localRuntime(t)
	res, err := r.Exec(context.Background(), testAgent(), runtime.ExecRequest{
		Argv: []string{"sh", "-c", "head -c 100000 /dev/zero; head -c 50 /dev/zero >&2; echo done >&2"}, MaxOutput: 100})
	must(t, err)
	if len(res.Stdout) != 100 || len(res.Stderr) != 55 || !res.Truncated || res.ExitCode != 0 {
		t.Errorf("stdout %d stderr %d truncated %v code %d", len(res.Stdout), len(res.Stderr), res.Truncated, res.ExitCode)
	}
}

// TestExecTimeout: the in-pod timeout ends the command and its children.
func TestExecTimeout(t *testing.T) {
	r, f := localRuntime(t)
	pidFile := filepath.Join(f.ws, "child.pid")
	res, err := r.Exec(context.Background(), testAgent(), runtime.ExecRequest{
		Argv:    []string{"sh", "-c", `sleep 60 & echo $! > child.pid; wait`},
		Timeout: time.Second,
	})
	must(t, err)
	if !res.TimedOut || res.ExitCode != 124 {
		t.Errorf("result %+v", res)
	}
	b, err := os.ReadFile(pidFile)
	must(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	must(t, err)
	deadline := time.Now().Add(testenv.EventBound)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("child %d of the timed-out command still runs", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// A command that ends in time is not TimedOut even when it exits 124.
	res, err = r.Exec(context.Background(), testAgent(), runtime.ExecRequest{Argv: []string{"sh", "-c", "exit 124"}, Timeout: 30 * time.Second})
	if err != nil || res.TimedOut || res.ExitCode != 124 {
		t.Errorf("exit 124: %+v %v", res, err)
	}
}

// alive reports whether pid runs (a zombie waiting for its reaper counts as gone).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

func TestExecCallerCancel(t *testing.T) {
	r, _ := localRuntime(t)
	// The caller giving up ends the exec stream and is reported as such.
	r.exec = func(ctx context.Context, _, _ string, _ []string, _ io.Reader, _, _ io.Writer) error {
		<-ctx.Done()
		return ctx.Err()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := r.Exec(ctx, testAgent(), runtime.ExecRequest{Argv: []string{"true"}})
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("caller cancel: %v", err)
	}
}

func TestExecNotRunning(t *testing.T) {
	notReady := runningTestPod()
	notReady.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
	pending := runningTestPod()
	pending.Status.Phase = corev1.PodPending
	foreign := runningTestPod()
	foreign.Labels = nil
	deleting := runningTestPod()
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	for name, pod := range map[string]*corev1.Pod{"none": nil, "crashing": notReady, "pending": pending, "foreign": foreign, "deleting": deleting} {
		r, _ := localRuntime(t)
		r.opts.APIReader = podReader{pod}
		if _, err := r.Exec(context.Background(), testAgent(), runtime.ExecRequest{Argv: []string{"true"}}); !errors.Is(err, runtime.ErrNotRunning) {
			t.Errorf("%s: exec: %v", name, err)
		}
		if _, err := r.ReadFile(context.Background(), testAgent(), "x"); !errors.Is(err, runtime.ErrNotRunning) {
			t.Errorf("%s: read: %v", name, err)
		}
	}
}

func TestExecStreamErrors(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want error
	}{
		{apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "a1-0"), runtime.ErrNotRunning},
		{errors.New(`unable to upgrade connection: container not found ("gateway")`), runtime.ErrNotRunning},
		{errors.New("connection refused"), runtime.ErrExec},
		// The API server (or the kubelet behind it) not answering is not the command failing.
		{&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, runtime.ErrUnavailable},
		{fmt.Errorf("error dialing backend: %w", syscall.ECONNRESET), runtime.ErrUnavailable},
		// The API server's answer when the kubelet is down, as text only.
		{errors.New("error dialing backend: dial tcp 10.0.0.5:10250: connect: connection refused"), runtime.ErrUnavailable},
		{apierrors.NewServiceUnavailable("the server is currently unable to handle the request"), runtime.ErrUnavailable},
	} {
		r, _ := localRuntime(t)
		r.exec = func(context.Context, string, string, []string, io.Reader, io.Writer, io.Writer) error { return tc.err }
		if _, err := r.Exec(context.Background(), testAgent(), runtime.ExecRequest{Argv: []string{"true"}}); !errors.Is(err, tc.want) {
			t.Errorf("%v: got %v", tc.err, err)
		}
	}
	r := New(Options{Engine: stubEngine{}, APIReader: podReader{runningTestPod()},
		Client: fake.NewClientBuilder().WithObjects(runningTestPod()).Build()})
	if _, err := r.Exec(context.Background(), &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Name: "a1", Namespace: "ws1"}},
		runtime.ExecRequest{Argv: []string{"true"}}); err == nil || !strings.Contains(err.Error(), "REST config") {
		t.Errorf("no REST config: %v", err)
	}
}
