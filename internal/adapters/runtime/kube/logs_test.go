package kube

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	k8sfake "k8s.io/client-go/kubernetes/fake"

	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// The fake clientset answers every pods/log request with "fake logs".
func TestLogsOfThePod(t *testing.T) {
	r := New(Options{Engine: stubEngine{}, APIReader: podReader{runningTestPod()}, Clientset: k8sfake.NewClientset()})
	lines, err := r.Logs(context.Background(), testAgent(), runtime.LogRequest{Tail: 20})
	if err != nil || len(lines) != 1 || lines[0] != "fake logs" {
		t.Fatalf("tail: %q, %v", lines, err)
	}
	var got []string
	_, err = r.Logs(context.Background(), testAgent(), runtime.LogRequest{Tail: 20, Follow: func(l string) bool {
		got = append(got, l)
		return true
	}})
	if !errors.Is(err, io.EOF) || len(got) != 1 || got[0] != "fake logs" {
		t.Fatalf("follow: %q, %v", got, err)
	}
}

func TestLogsWithoutAPod(t *testing.T) {
	r := New(Options{Engine: stubEngine{}, APIReader: podReader{}, Clientset: k8sfake.NewClientset()})
	lines, err := r.Logs(context.Background(), testAgent(), runtime.LogRequest{Tail: 20})
	if err != nil || lines == nil || len(lines) != 0 {
		t.Fatalf("no pod: %q, %v, want no lines", lines, err)
	}
	_, err = r.Logs(context.Background(), testAgent(), runtime.LogRequest{Tail: 20, Follow: func(string) bool { return true }})
	if !errors.Is(err, runtime.ErrNotRunning) {
		t.Fatalf("follow without a pod: %v", err)
	}
}

func TestReadLinesSplitsLongLines(t *testing.T) {
	long := strings.Repeat("y", runtime.MaxLogLine+10)
	var got []string
	err := readLines(strings.NewReader("a\r\n"+long+"\nlast"), func(l string) bool { got = append(got, l); return true })
	if !errors.Is(err, io.EOF) || len(got) != 4 || got[0] != "a" || len(got[1]) != runtime.MaxLogLine || got[2] != "yyyyyyyyyy" || got[3] != "last" {
		t.Fatalf("lines %d, %v", len(got), err)
	}
}
