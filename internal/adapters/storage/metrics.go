package storage

import (
	"context"
	"errors"
	"io"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentplane/agentplane/internal/promreg"
)

// Operation results counted by Instrument.
const (
	ResultOK       = "ok"
	ResultNotFound = "not_found"
	ResultInvalid  = "invalid"
	// ResultError: the backend failed or could not be reached (ErrUnavailable).
	ResultError = "error"
	// ResultAborted: the caller's side failed (its upload's reader, its context), which says
	// nothing about the backend.
	ResultAborted = "aborted"
)

// Backend names a Store's kind for metrics ("local", "s3"); stores that do not say are "other".
func Backend(s Store) string {
	if b, ok := s.(interface{ Backend() string }); ok {
		return b.Backend()
	}
	return "other"
}

// Instrument wraps s so that every operation counts into
// agentplane_storage_operations_total{backend,op,result} on reg. A nil s stays nil.
func Instrument(s Store, reg prometheus.Registerer) Store {
	if s == nil {
		return nil
	}
	ops := promreg.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentplane_storage_operations_total",
		Help: "Operations on the files and snapshots storage by backend (local, s3), operation (put, get, stat, delete, list) and result (ok; not_found; invalid; error: the backend failed or is unreachable; aborted: the caller's upload or context failed).",
	}, []string{"backend", "op", "result"}))
	return &instrumented{Store: s, backend: Backend(s), ops: ops}
}

type instrumented struct {
	Store
	backend string
	ops     *prometheus.CounterVec
}

func (s *instrumented) count(op string, err error) {
	result := ResultOK
	switch {
	case err == nil:
	case errors.Is(err, ErrNotFound):
		result = ResultNotFound
	case errors.Is(err, ErrInvalid):
		result = ResultInvalid
	case errors.Is(err, ErrUnavailable):
		result = ResultError
	default:
		result = ResultAborted
	}
	s.ops.WithLabelValues(s.backend, op, result).Inc()
}

func (s *instrumented) Put(ctx context.Context, space string, r io.Reader) (Object, error) {
	o, err := s.Store.Put(ctx, space, r)
	s.count("put", err)
	return o, err
}

func (s *instrumented) Get(ctx context.Context, space, cid string) (io.ReadCloser, Object, error) {
	rc, o, err := s.Store.Get(ctx, space, cid)
	s.count("get", err)
	return rc, o, err
}

func (s *instrumented) Stat(ctx context.Context, space, cid string) (Object, error) {
	o, err := s.Store.Stat(ctx, space, cid)
	s.count("stat", err)
	return o, err
}

func (s *instrumented) Delete(ctx context.Context, space, cid string) error {
	err := s.Store.Delete(ctx, space, cid)
	s.count("delete", err)
	return err
}

func (s *instrumented) List(ctx context.Context, space string) ([]Object, error) {
	objs, err := s.Store.List(ctx, space)
	s.count("list", err)
	return objs, err
}
