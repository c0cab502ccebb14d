package storage_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/internal/adapters/cid"
	"github.com/agentplane/agentplane/internal/adapters/storage"
	"github.com/agentplane/agentplane/internal/adapters/storage/storagetest"
)

func TestValidateSpace(t *testing.T) {
	for _, ok := range []string{"demo", "demo/public", "demo/private", "demo/snapshots", "a-b.c/1/x-y", strings.Repeat("a", 200)} {
		if err := storage.ValidateSpace(ok); err != nil {
			t.Errorf("ValidateSpace(%q) = %v, want nil", ok, err)
		}
	}
	for _, bad := range append(storagetest.BadSpaces, strings.Repeat("a", 201), "-demo", "demo/.", "a..b") {
		err := storage.ValidateSpace(bad)
		if !errors.Is(err, storage.ErrInvalid) {
			t.Errorf("ValidateSpace(%q) = %v, want ErrInvalid", bad, err)
		}
	}
}

func TestCanonicalCID(t *testing.T) {
	c, _ := cid.Parse(storagetest.HelloCID)
	b58, _ := c.StringOfBase('z')
	got, err := storage.CanonicalCID(b58)
	if err != nil || got != storagetest.HelloCID || b58[0] != 'z' {
		t.Fatalf("CanonicalCID(%s) = %q, %v", b58, got, err)
	}
	if _, err := storage.CanonicalCID("not-a-cid"); !errors.Is(err, storage.ErrInvalid) {
		t.Fatalf("CanonicalCID(bad) = %v, want ErrInvalid", err)
	}
}

func TestErrorsWrapCause(t *testing.T) {
	cause := errors.New("connection refused")
	err := storage.Unavailable("get", cause)
	if !errors.Is(err, storage.ErrUnavailable) || !errors.Is(err, cause) {
		t.Fatalf("Unavailable does not wrap both: %v", err)
	}
	err = storage.NotFound("demo/public", "bafy", cause)
	if !errors.Is(err, storage.ErrNotFound) || !errors.Is(err, cause) {
		t.Fatalf("NotFound does not wrap both: %v", err)
	}
}
