package kube

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// Logs implements runtime.Runtime: the gateway container's log of the agent's pod, through
// the API server (pods/log). No pod (a stopped or suspended agent), or a container that has
// not started yet: no lines (ErrNotRunning when following). Following ends with io.EOF when
// the API server closes the stream (the container exited, the pod went away).
func (r *Runtime) Logs(ctx context.Context, agent *agentsv1.Agent, req runtime.LogRequest) ([]string, error) {
	pod := &corev1.Pod{}
	err := r.opts.APIReader.Get(ctx, types.NamespacedName{Namespace: agent.Namespace, Name: PodName(agent)}, pod)
	switch {
	case apierrors.IsNotFound(err), err == nil && !ownedPod(pod, agent):
		return noLogs(req)
	case err != nil && unreachable(err):
		return nil, fmt.Errorf("%w: get pod: %w", runtime.ErrUnavailable, err)
	case err != nil:
		return nil, fmt.Errorf("get pod: %w", err)
	}
	if pod.DeletionTimestamp != nil {
		// A pod still terminating after its StatefulSet went is what Delete left: the
		// output went with the agent.
		gone, err := r.statefulSetGone(ctx, agent)
		if err != nil {
			return nil, err
		}
		if gone {
			return noLogs(req)
		}
	}
	cs, err := r.logClient()
	if err != nil {
		return nil, err
	}
	tail := int64(max(req.Tail, 1))
	opts := &corev1.PodLogOptions{Container: ContainerGateway, TailLines: &tail, Follow: req.Follow != nil}
	if !req.Since.IsZero() {
		opts.SinceTime = &metav1.Time{Time: req.Since}
	}
	rc, err := cs.CoreV1().Pods(agent.Namespace).GetLogs(pod.Name, opts).Stream(ctx)
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return nil, nil
		case apierrors.IsNotFound(err), apierrors.IsBadRequest(err):
			// Gone since, or its container is waiting to start.
			return noLogs(req)
		case unreachable(err):
			return nil, fmt.Errorf("%w: pod log: %w", runtime.ErrUnavailable, err)
		}
		return nil, fmt.Errorf("pod log: %w", err)
	}
	defer rc.Close()
	var lines []string
	emit := req.Follow
	if emit == nil {
		emit = func(l string) bool { lines = append(lines, l); return true }
	}
	err = readLines(rc, emit)
	switch {
	case req.Follow == nil && (err == nil || errors.Is(err, io.EOF)):
		return lines, nil
	case ctx.Err() != nil, err == nil:
		return nil, nil
	case errors.Is(err, io.EOF):
		return nil, io.EOF
	case req.Follow == nil:
		return nil, fmt.Errorf("pod log: %w", err)
	}
	return nil, io.EOF // the stream broke: the caller follows again if the agent still exists
}

func noLogs(req runtime.LogRequest) ([]string, error) {
	if req.Follow != nil {
		return nil, runtime.ErrNotRunning
	}
	return []string{}, nil
}

// readLines calls emit with each line of r (split at runtime.MaxLogLine) until r ends
// (io.EOF), fails, or emit returns false (nil).
func readLines(r io.Reader, emit func(string) bool) error {
	br := bufio.NewReaderSize(r, runtime.MaxLogLine)
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			s := string(line)
			if line[len(line)-1] == '\n' {
				s = s[:len(s)-1]
			}
			if len(s) > 0 && s[len(s)-1] == '\r' {
				s = s[:len(s)-1]
			}
			if !emit(s) {
				return nil
			}
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue // a long line: its next part is the next line
		case err != nil:
			return err
		}
	}
}

// logClient is the clientset for pods/log (no REST config needed, unlike pods/exec).
func (r *Runtime) logClient() (kubernetes.Interface, error) {
	if r.opts.Clientset != nil {
		return r.opts.Clientset, nil
	}
	return r.clientset()
}

// statefulSetGone reports whether the agent's StatefulSet is deleted or being deleted.
func (r *Runtime) statefulSetGone(ctx context.Context, agent *agentsv1.Agent) (bool, error) {
	sts := &appsv1.StatefulSet{}
	err := r.opts.APIReader.Get(ctx, types.NamespacedName{Namespace: agent.Namespace, Name: StatefulSetName(agent)}, sts)
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil && unreachable(err):
		return false, fmt.Errorf("%w: get statefulset: %w", runtime.ErrUnavailable, err)
	case err != nil:
		return false, fmt.Errorf("get statefulset: %w", err)
	}
	return sts.DeletionTimestamp != nil, nil
}
