// Package storagetest is the conformance suite every storage.Store
// implementation runs from its own tests:
//
//	func TestConformance(t *testing.T) { storagetest.Run(t, store) }
//
// Each subtest works in its own fresh spaces under a unique prefix, so one
// store can serve the whole suite (and be reused afterwards).
package storagetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/agentplane/agentplane/internal/adapters/cid"
	"github.com/agentplane/agentplane/internal/adapters/storage"
)

// Known CIDs (verified in internal/adapters/cid against the JavaScript importer).
const (
	EmptyCID = "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"
	HelloCID = "bafkreifjjcie6lypi6ny7amxnfftagclbuxndqonfipmb64f2km2devei4" // "hello world\n"
)

var prefixSeq atomic.Int64

// Spaces returns n fresh spaces for one test, e.g. "conf-<unique>/a",
// under a prefix no other call returns.
func Spaces(n int) []string {
	prefix := fmt.Sprintf("conf-%d-%d", time.Now().UnixNano(), prefixSeq.Add(1))
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s/s%d", prefix, i)
	}
	return out
}

// RandomBytes returns n deterministic pseudo-random bytes.
func RandomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// Run runs the conformance suite against s.
func Run(t *testing.T, s storage.Store) {
	t.Run("PutGetStatListDelete", func(t *testing.T) { testRoundTrip(t, s) })
	t.Run("IdempotentPut", func(t *testing.T) { testIdempotent(t, s) })
	t.Run("ConcurrentSamePut", func(t *testing.T) { testConcurrent(t, s) })
	t.Run("FailedPutIsAtomic", func(t *testing.T) { testAtomic(t, s) })
	t.Run("BadSpaceRejected", func(t *testing.T) { testBadSpace(t, s) })
	t.Run("NotFound", func(t *testing.T) { testNotFound(t, s) })
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// MustPut puts data and checks the returned object against internal/adapters/cid.
func MustPut(t *testing.T, s storage.Store, space string, data []byte) storage.Object {
	t.Helper()
	obj, err := s.Put(ctxT(t), space, bytes.NewReader(data))
	if err != nil {
		t.Fatalf("Put(%s, %d bytes): %v", space, len(data), err)
	}
	want, _, err := cid.Compute(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if obj.CID != want.String() || obj.Size != int64(len(data)) {
		t.Fatalf("Put(%s) = %+v, want {CID:%s Size:%d}", space, obj, want, len(data))
	}
	return obj
}

// MustGet reads the object back and compares its bytes.
func MustGet(t *testing.T, s storage.Store, space, c string, want []byte) {
	t.Helper()
	rc, obj, err := s.Get(ctxT(t), space, c)
	if err != nil {
		t.Fatalf("Get(%s, %s): %v", space, c, err)
	}
	got, err := io.ReadAll(rc)
	_ = rc.Close()
	if err != nil {
		t.Fatalf("Get(%s, %s): reading: %v", space, c, err)
	}
	if !bytes.Equal(got, want) || obj.Size != int64(len(want)) {
		t.Fatalf("Get(%s, %s) = %d bytes (object %+v), want %d bytes", space, c, len(got), obj, len(want))
	}
}

// MustList checks the objects of a space.
func MustList(t *testing.T, s storage.Store, space string, want ...storage.Object) {
	t.Helper()
	got, err := s.List(ctxT(t), space)
	if err != nil {
		t.Fatalf("List(%s): %v", space, err)
	}
	want = slices.Clone(want)
	slices.SortFunc(want, func(a, b storage.Object) int { return cmpString(a.CID, b.CID) })
	if len(want) == 0 && got == nil {
		return
	}
	if !slices.Equal(got, want) {
		t.Fatalf("List(%s) = %+v, want %+v", space, got, want)
	}
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// WantErr fails unless err matches target.
func WantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: err = %v, want %v", what, err, target)
	}
}

func testRoundTrip(t *testing.T, s storage.Store) {
	ctx := ctxT(t)
	sp := Spaces(3)
	a, b, nested := sp[0], sp[1], sp[0]+"/nested"
	_ = sp[2]

	hello := []byte("hello world\n")
	big := RandomBytes(1<<20+123, 1) // several chunks
	oh := MustPut(t, s, a, hello)
	if oh.CID != HelloCID {
		t.Fatalf("hello CID = %s, want %s", oh.CID, HelloCID)
	}
	ob := MustPut(t, s, a, big)
	oe := MustPut(t, s, b, nil)
	if oe.CID != EmptyCID || oe.Size != 0 {
		t.Fatalf("empty object = %+v", oe)
	}
	on := MustPut(t, s, nested, []byte("in a nested space"))

	MustGet(t, s, a, oh.CID, hello)
	MustGet(t, s, a, ob.CID, big)
	MustGet(t, s, b, oe.CID, nil)
	MustGet(t, s, nested, on.CID, []byte("in a nested space"))

	// The same CIDv1 spelled in base58btc names the same object.
	c, _ := cid.Parse(oh.CID)
	alt, _ := c.StringOfBase('z')
	if got, err := s.Stat(ctx, a, alt); err != nil || got != oh {
		t.Fatalf("Stat(%s, %s) = %+v, %v; want %+v", a, alt, got, err, oh)
	}
	if got, err := s.Stat(ctx, a, ob.CID); err != nil || got != ob {
		t.Fatalf("Stat(%s, %s) = %+v, %v; want %+v", a, ob.CID, got, err, ob)
	}

	// Spaces are separate, nested ones included.
	MustList(t, s, a, oh, ob)
	MustList(t, s, b, oe)
	MustList(t, s, nested, on)
	_, err := s.Stat(ctx, b, oh.CID)
	WantErr(t, "Stat in another space", err, storage.ErrNotFound)

	if err := s.Delete(ctx, a, oh.CID); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	_, err = s.Stat(ctx, a, oh.CID)
	WantErr(t, "Stat after Delete", err, storage.ErrNotFound)
	_, _, err = s.Get(ctx, a, oh.CID)
	WantErr(t, "Get after Delete", err, storage.ErrNotFound)
	MustList(t, s, a, ob)
	if err := s.Delete(ctx, a, oh.CID); err != nil {
		t.Fatalf("Delete of a missing object: %v", err)
	}
	for _, o := range []struct {
		space string
		obj   storage.Object
	}{{a, ob}, {b, oe}, {nested, on}} {
		if err := s.Delete(ctx, o.space, o.obj.CID); err != nil {
			t.Fatal(err)
		}
		MustList(t, s, o.space)
	}
}

func testIdempotent(t *testing.T, s storage.Store) {
	space := Spaces(1)[0]
	data := RandomBytes(300_000, 2)
	o1 := MustPut(t, s, space, data)
	o2 := MustPut(t, s, space, data)
	if o1 != o2 {
		t.Fatalf("second Put = %+v, first %+v", o2, o1)
	}
	MustList(t, s, space, o1)
	MustGet(t, s, space, o1.CID, data)
}

func testConcurrent(t *testing.T, s storage.Store) {
	space := Spaces(1)[0]
	data := RandomBytes(700_000, 3)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = s.Put(ctxT(t), space, bytes.NewReader(data))
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("concurrent Put: %v", err)
		}
	}
	c, n, _ := cid.Compute(bytes.NewReader(data))
	obj := storage.Object{CID: c.String(), Size: n}
	MustList(t, s, space, obj)
	MustGet(t, s, space, obj.CID, data)
}

func testAtomic(t *testing.T, s storage.Store) {
	boom := errors.New("reader exploded")
	data := RandomBytes(600_000, 4)
	for _, cut := range []int{0, 10, 300_000} {
		space := Spaces(1)[0]
		r := io.MultiReader(bytes.NewReader(data[:cut]), iotest.ErrReader(boom))
		obj, err := s.Put(ctxT(t), space, r)
		if !errors.Is(err, boom) || errors.Is(err, storage.ErrUnavailable) {
			t.Fatalf("Put failing after %d bytes = %+v, %v; want the reader's error, not ErrUnavailable", cut, obj, err)
		}
		MustList(t, s, space)
		prefix, _, _ := cid.Compute(bytes.NewReader(data[:cut]))
		_, err = s.Stat(ctxT(t), space, prefix.String())
		WantErr(t, fmt.Sprintf("Stat of the %d bytes read before the failure", cut), err, storage.ErrNotFound)
	}

	// A context cancelled mid-way stores nothing either.
	space := Spaces(1)[0]
	ctx, cancel := context.WithCancel(ctxT(t))
	r := &cancelAfter{r: bytes.NewReader(data), n: 100_000, cancel: cancel}
	if _, err := s.Put(ctx, space, r); !errors.Is(err, context.Canceled) {
		t.Fatalf("Put with a cancelled context: err = %v, want context.Canceled", err)
	}
	MustList(t, s, space)
}

// cancelAfter cancels its context once n bytes have been read.
type cancelAfter struct {
	r      io.Reader
	n      int
	cancel context.CancelFunc
}

func (c *cancelAfter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if c.n -= n; c.n <= 0 {
		c.cancel()
	}
	return n, err
}

// BadSpaces are spaces every Store must reject with storage.ErrInvalid.
var BadSpaces = []string{
	"", "/demo", "demo/", "demo//public", "Demo/public", "demo/../etc", "..", "demo/..", "./demo",
	"demo/.hidden", "demo/pub lic", "demo/pub_lic", "demo\\public", "démo", "demo/" + EmptyCID,
	string(make([]byte, 201)), "a" + string(bytes.Repeat([]byte("/b"), 100)),
}

func testBadSpace(t *testing.T, s storage.Store) {
	ctx := ctxT(t)
	for _, sp := range BadSpaces {
		_, err := s.Put(ctx, sp, bytes.NewReader([]byte("x")))
		WantErr(t, fmt.Sprintf("Put(%q)", sp), err, storage.ErrInvalid)
		_, _, err = s.Get(ctx, sp, HelloCID)
		WantErr(t, fmt.Sprintf("Get(%q)", sp), err, storage.ErrInvalid)
		_, err = s.Stat(ctx, sp, HelloCID)
		WantErr(t, fmt.Sprintf("Stat(%q)", sp), err, storage.ErrInvalid)
		err = s.Delete(ctx, sp, HelloCID)
		WantErr(t, fmt.Sprintf("Delete(%q)", sp), err, storage.ErrInvalid)
		_, err = s.List(ctx, sp)
		WantErr(t, fmt.Sprintf("List(%q)", sp), err, storage.ErrInvalid)
	}
	// The spaces the product uses are fine.
	prefix := Spaces(1)[0]
	for _, sp := range []string{"demo/public", "demo/private", "demo/snapshots", "team-1/v1.2/x"} {
		MustList(t, s, prefix+"/"+sp)
	}
}

func testNotFound(t *testing.T, s storage.Store) {
	ctx := ctxT(t)
	space := Spaces(1)[0]
	_, _, err := s.Get(ctx, space, HelloCID)
	WantErr(t, "Get of a missing object", err, storage.ErrNotFound)
	_, err = s.Stat(ctx, space, HelloCID)
	WantErr(t, "Stat of a missing object", err, storage.ErrNotFound)
	if err := s.Delete(ctx, space, HelloCID); err != nil {
		t.Fatalf("Delete of a missing object: %v", err)
	}
	MustList(t, s, space)

	MustPut(t, s, space, []byte("present"))
	for _, bad := range []string{"", "nope", "../x", HelloCID + "x"} {
		_, _, err := s.Get(ctx, space, bad)
		WantErr(t, fmt.Sprintf("Get(%q)", bad), err, storage.ErrInvalid)
		_, err = s.Stat(ctx, space, bad)
		WantErr(t, fmt.Sprintf("Stat(%q)", bad), err, storage.ErrInvalid)
		err = s.Delete(ctx, space, bad)
		WantErr(t, fmt.Sprintf("Delete(%q)", bad), err, storage.ErrInvalid)
	}
}
