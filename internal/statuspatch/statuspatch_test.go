package statuspatch

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

var (
	conflict   = apierrors.NewConflict(schema.GroupResource{Resource: "agents"}, "a", errors.New("changed"))
	gone       = apierrors.NewNotFound(schema.GroupResource{Resource: "agents"}, "a")
	errRefused = errors.New("refused")
)

// script plays the API server for one Run: what each read, change and write answers.
type script struct {
	readErr  error
	rereads  int     // Change answers ErrReread this many times first
	nothing  bool    // Change finds nothing to write
	writes   []error // each write's answer, in turn (nil past the end)
	backoff  wait.Backoff
	ctxAlive time.Duration // > 0: the context ends after this long

	reads     []int    // the conflicts count each read was given
	patches   []string // the patches written
	changes   int
	changeErr error
}

func (s *script) loop() Loop {
	return Loop{
		Read: func(_ context.Context, conflicts int) (client.Object, error) {
			s.reads = append(s.reads, conflicts)
			a := &agentsv1.Agent{}
			a.Name, a.ResourceVersion = "a", "7"
			return a, s.readErr
		},
		Change: func(obj client.Object) (bool, error) {
			s.changes++
			if s.rereads > 0 {
				s.rereads--
				return false, ErrReread
			}
			obj.(*agentsv1.Agent).Status.Endpoint = "changed"
			return !s.nothing, s.changeErr
		},
		Write: func(_ context.Context, obj client.Object, patch client.Patch) error {
			data, err := patch.Data(obj)
			if err != nil {
				return err
			}
			s.patches = append(s.patches, string(data))
			if n := len(s.patches); n <= len(s.writes) {
				return s.writes[n-1]
			}
			return nil
		},
		Backoff: s.backoff,
	}
}

func TestRun(t *testing.T) {
	for _, tc := range []struct {
		name   string
		s      script
		wrote  bool
		err    func(error) bool // nil: no error
		reads  []int
		writes int
	}{
		{name: "a change is written once", s: script{}, wrote: true, reads: []int{0}, writes: 1},
		{name: "nothing to write: no write", s: script{nothing: true}, reads: []int{0}, writes: 0},
		{name: "a conflict reads again, told so, and writes", s: script{writes: []error{conflict}, backoff: wait.Backoff{Steps: 3}},
			wrote: true, reads: []int{0, 1}, writes: 2},
		{name: "every attempt conflicts: contention, still a conflict", s: script{writes: []error{conflict, conflict, conflict}, backoff: wait.Backoff{Steps: 3}},
			err: func(err error) bool { return errors.Is(err, ErrContention) && apierrors.IsConflict(err) }, reads: []int{0, 1, 2}, writes: 3},
		{name: "one attempt by default", s: script{writes: []error{conflict}},
			err: apierrors.IsConflict, reads: []int{0}, writes: 1},
		{name: "a reread is no attempt", s: script{rereads: 2, backoff: wait.Backoff{Steps: 1}}, wrote: true, reads: []int{0, 0, 0}, writes: 1},
		{name: "another write error is returned at once", s: script{writes: []error{errRefused}, backoff: wait.Backoff{Steps: 5}},
			err: func(err error) bool { return errors.Is(err, errRefused) }, reads: []int{0}, writes: 1},
		{name: "a read error is returned as it is", s: script{readErr: gone, backoff: wait.Backoff{Steps: 5}},
			err: apierrors.IsNotFound, reads: []int{0}, writes: 0},
		{name: "a change error is returned, nothing written", s: script{changeErr: errRefused},
			err: func(err error) bool { return errors.Is(err, errRefused) }, reads: []int{0}, writes: 0},
		{name: "the wait after a conflict ends with the context", s: script{writes: []error{conflict}, backoff: wait.Backoff{Steps: 3, Duration: time.Hour}, ctxAlive: time.Millisecond},
			err: func(err error) bool { return errors.Is(err, context.DeadlineExceeded) }, reads: []int{0}, writes: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			if tc.s.ctxAlive > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.s.ctxAlive)
				defer cancel()
			}
			s := tc.s
			wrote, err := Run(ctx, s.loop())
			switch {
			case tc.err == nil && err != nil:
				t.Fatalf("error %v", err)
			case tc.err != nil && !tc.err(err):
				t.Fatalf("error %v is not the one wanted", err)
			}
			if wrote != tc.wrote {
				t.Errorf("wrote %v, want %v", wrote, tc.wrote)
			}
			if len(s.reads) != len(tc.reads) || len(s.patches) != tc.writes {
				t.Fatalf("reads %v and %d writes, want %v and %d", s.reads, len(s.patches), tc.reads, tc.writes)
			}
			for i := range tc.reads {
				if s.reads[i] != tc.reads[i] {
					t.Errorf("read %d was told %d conflicts, want %d", i, s.reads[i], tc.reads[i])
				}
			}
			for _, p := range s.patches {
				checkPatch(t, p)
			}
		})
	}
}

// checkPatch: the patch carries the change and the resourceVersion read (the lock).
func checkPatch(t *testing.T, p string) {
	t.Helper()
	var got struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
		Status map[string]any `json:"status"`
	}
	if err := json.Unmarshal([]byte(p), &got); err != nil {
		t.Fatal(err)
	}
	if got.Metadata.ResourceVersion != "7" || got.Status["endpoint"] != "changed" || len(got.Status) != 1 {
		t.Errorf("patch %s: want the status change alone, guarded by resourceVersion 7", p)
	}
}
