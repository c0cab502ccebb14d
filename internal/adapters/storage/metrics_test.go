package storage_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/agentplane/agentplane/internal/adapters/storage"
	"github.com/agentplane/agentplane/internal/adapters/storage/local"
)

// failing answers every call with err.
type failing struct{ err error }

func (f failing) Put(context.Context, string, io.Reader) (storage.Object, error) {
	return storage.Object{}, f.err
}
func (f failing) Get(context.Context, string, string) (io.ReadCloser, storage.Object, error) {
	return nil, storage.Object{}, f.err
}
func (f failing) Stat(context.Context, string, string) (storage.Object, error) {
	return storage.Object{}, f.err
}
func (f failing) Delete(context.Context, string, string) error { return f.err }
func (f failing) List(context.Context, string) ([]storage.Object, error) {
	return nil, f.err
}

// Every operation counts once, by backend, operation and the class of its error; the store's
// answers pass through unchanged.
func TestInstrumentCountsOperations(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	ctx := context.Background()
	dir := t.TempDir()
	l, err := local.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := storage.Instrument(l, reg)
	obj, err := s.Put(ctx, "demo/public", strings.NewReader("hello"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Stat(ctx, "demo/public", obj.CID); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "demo/public", obj.CID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Stat(ctx, "demo/public", obj.CID); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("stat of a deleted object: %v", err)
	}
	if _, err := s.List(ctx, "Bad Space"); !errors.Is(err, storage.ErrInvalid) {
		t.Fatalf("list of a bad space: %v", err)
	}
	down := storage.Unavailable("get", errors.New("connection refused"))
	if _, _, err := storage.Instrument(failing{down}, reg).Get(ctx, "demo/public", obj.CID); !errors.Is(err, down) {
		t.Fatalf("get through a failing store: %v", err)
	}
	if _, err := storage.Instrument(failing{context.Canceled}, reg).Put(ctx, "demo/public", strings.NewReader("x")); !errors.Is(err, context.Canceled) {
		t.Fatalf("put cancelled: %v", err)
	}
	want := `
# HELP agentplane_storage_operations_total Operations on the files and snapshots storage by backend (local, s3), operation (put, get, stat, delete, list) and result (ok; not_found; invalid; error: the backend failed or is unreachable; aborted: the caller's upload or context failed).
# TYPE agentplane_storage_operations_total counter
agentplane_storage_operations_total{backend="local",op="delete",result="ok"} 1
agentplane_storage_operations_total{backend="local",op="list",result="invalid"} 1
agentplane_storage_operations_total{backend="local",op="put",result="ok"} 1
agentplane_storage_operations_total{backend="local",op="stat",result="not_found"} 1
agentplane_storage_operations_total{backend="local",op="stat",result="ok"} 1
agentplane_storage_operations_total{backend="other",op="get",result="error"} 1
agentplane_storage_operations_total{backend="other",op="put",result="aborted"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "agentplane_storage_operations_total"); err != nil {
		t.Error(err)
	}
	if storage.Instrument(nil, reg) != nil {
		t.Error("a nil store was wrapped")
	}
}
