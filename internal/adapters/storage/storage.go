// Package storage defines a blob store for content-addressed bytes: objects
// are keyed by their CID (internal/adapters/cid, the CID `ipfs add --cid-version=1`
// gives) inside caller-chosen key spaces such as "demo/public" or
// "demo/snapshots". Implementations live in the subpackages local (a
// directory on disk) and s3 (an S3-compatible bucket); storagetest holds the
// conformance suite both pass.
package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/agentplane/agentplane/internal/adapters/cid"
)

// Object describes a stored blob.
type Object struct {
	// CID is the CIDv1 (base32) of the bytes.
	CID string
	// Size is the number of bytes.
	Size int64
}

// Store is a blob store for content-addressed bytes. All methods are safe for
// concurrent use. Errors wrap ErrNotFound, ErrUnavailable or ErrInvalid where
// those apply, together with their cause.
type Store interface {
	// Put stores the bytes of r under space and returns their CID (internal/adapters/cid) and size.
	// The write is atomic: a failed Put leaves nothing behind. Putting the same bytes twice is idempotent.
	Put(ctx context.Context, space string, r io.Reader) (Object, error)
	// Get opens the object cid of space. The caller must close the reader.
	Get(ctx context.Context, space, cid string) (io.ReadCloser, Object, error)
	// Stat describes the object cid of space.
	Stat(ctx context.Context, space, cid string) (Object, error)
	// Delete removes the object cid of space; a missing object is not an error.
	Delete(ctx context.Context, space, cid string) error
	// List returns the objects of space (not those of nested spaces), sorted by
	// CID. An unknown space is empty, not an error.
	List(ctx context.Context, space string) ([]Object, error)
}

var (
	// ErrNotFound means the object does not exist.
	ErrNotFound = errors.New("storage: object not found")
	// ErrUnavailable means the backend could not be reached or failed
	// (network error, timeout, 5xx, disk error); callers answer 503.
	ErrUnavailable = errors.New("storage: backend unavailable")
	// ErrInvalid means a bad space or CID argument; callers answer 400.
	ErrInvalid = errors.New("storage: invalid argument")
)

// MaxSpaceLen is the maximum length of a space.
const MaxSpaceLen = 200

// ValidateSpace checks a key space: one or more "/"-separated segments, each
// made of lowercase letters, digits, '-' and '.', starting with a letter or a
// digit (so no "." or ".." segments and no hidden names), no leading, trailing
// or doubled '/', at most MaxSpaceLen characters, and no segment that is
// itself a valid CID (which could clash with an object name). The error wraps
// ErrInvalid.
func ValidateSpace(space string) error {
	bad := func(why string) error {
		return fmt.Errorf("%w: space %q: %s", ErrInvalid, space, why)
	}
	switch {
	case space == "":
		return bad("empty")
	case len(space) > MaxSpaceLen:
		return bad(fmt.Sprintf("longer than %d characters", MaxSpaceLen))
	case strings.HasPrefix(space, "/"):
		return bad("leading '/'")
	case strings.Contains(space, ".."):
		return bad("contains '..'")
	}
	for seg := range strings.SplitSeq(space, "/") {
		if seg == "" {
			return bad("empty segment")
		}
		if c := seg[0]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return bad("segment must start with a lowercase letter or a digit")
		}
		for _, c := range seg {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
				return bad(fmt.Sprintf("character %q not allowed (lowercase letters, digits, '-', '.', '/')", c))
			}
		}
		if cid.Valid(seg) {
			return bad("segment is a CID")
		}
	}
	return nil
}

// CanonicalCID parses s as a CID and returns the form objects are stored
// under: base32 for CIDv1 (a CIDv1 written in another multibase maps to the
// same object), "Qm…" for CIDv0. The error wraps ErrInvalid.
func CanonicalCID(s string) (string, error) {
	c, err := cid.Parse(s)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return c.String(), nil
}

// Unavailable wraps cause so that it matches ErrUnavailable (and still
// matches cause).
func Unavailable(op string, cause error) error {
	return fmt.Errorf("%w: %s: %w", ErrUnavailable, op, cause)
}

// NotFound returns an error matching ErrNotFound for cid in space, wrapping
// cause when it is not nil.
func NotFound(space, cid string, cause error) error {
	if cause == nil {
		return fmt.Errorf("%w: %s/%s", ErrNotFound, space, cid)
	}
	return fmt.Errorf("%w: %s/%s: %w", ErrNotFound, space, cid, cause)
}

// SourceReader wraps the caller's reader of a Put so that the store can tell
// the caller's read errors (and context cancellation) from its own failures:
// after a failed import, Err is the reader's or the context's error, or nil
// if the failure came from the store.
type SourceReader struct {
	ctx context.Context
	r   io.Reader
	err error
}

// NewSourceReader wraps r; reads fail with ctx's error once ctx is done.
func NewSourceReader(ctx context.Context, r io.Reader) *SourceReader {
	return &SourceReader{ctx: ctx, r: r}
}

// Read implements io.Reader.
func (s *SourceReader) Read(p []byte) (int, error) {
	if err := s.ctx.Err(); err != nil {
		s.err = err
		return 0, err
	}
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF {
		s.err = err
	}
	return n, err
}

// Err is the first error of the source (not io.EOF), if any.
func (s *SourceReader) Err() error { return s.err }

// SourceError returns the error a Put reports for a failed import: the source's
// own error (reader or context) if there was one, otherwise storeErr, the
// store's failure, marked as ErrUnavailable.
func (s *SourceReader) SourceError(op string, storeErr error) error {
	if s.err != nil {
		return fmt.Errorf("storage: reading input: %w", s.err)
	}
	return Unavailable(op, storeErr)
}

// SameCID reports whether a and b name the same object once canonical (a CIDv1 in another
// multibase equals its base32 form); strings that do not parse are compared as they are.
func SameCID(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	ca, errA := CanonicalCID(a)
	cb, errB := CanonicalCID(b)
	if errA != nil || errB != nil {
		return a == b
	}
	return ca == cb
}

// SnapshotSpace is the key space of a workspace's snapshots.
func SnapshotSpace(namespace string) string { return namespace + "/snapshots" }

// SkillsSpace is the key space of a workspace's skill bundles.
func SkillsSpace(namespace string) string { return namespace + "/skills" }
