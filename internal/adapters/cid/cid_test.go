package cid

import (
	"errors"
	"io"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	gocid "github.com/ipfs/go-cid"

	"github.com/agentplane/agentplane/internal/devtools/testenv"
)

// TestKnownVectors is the fast table test: CIDs verified against the
// JavaScript importer (see TestAgainstNodeImporter), checked through both
// Compute and Builder.
func TestKnownVectors(t *testing.T) {
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			c, n, err := Compute(v.open())
			if err != nil {
				t.Fatal(err)
			}
			if c.String() != v.want || n != v.length() {
				t.Fatalf("Compute = %s, %d; want %s, %d", c, n, v.want, v.length())
			}
			if c.Version() != 1 {
				t.Fatalf("CID version %d, want 1", c.Version())
			}

			// Same bytes through the writer side, in awkward write sizes.
			b := NewBuilder()
			defer b.Abort()
			if _, err := io.CopyBuffer(b, onlyReader{v.open()}, make([]byte, 7777)); err != nil {
				t.Fatal(err)
			}
			bc, bn, err := b.Sum()
			if err != nil {
				t.Fatal(err)
			}
			if !bc.Equals(c) || bn != n {
				t.Fatalf("Builder = %s, %d; Compute = %s, %d", bc, bn, c, n)
			}
		})
	}
}

// onlyReader hides WriterTo so io.CopyBuffer really uses the buffer.
type onlyReader struct{ io.Reader }

func TestComputeReadError(t *testing.T) {
	boom := errors.New("boom")
	for _, size := range []int64{0, 10, ChunkSize, 3*ChunkSize + 5} {
		r := io.MultiReader(vectorReader(size, 9), iotest.ErrReader(boom))
		if _, _, err := Compute(r); !errors.Is(err, boom) {
			t.Fatalf("after %d bytes: err = %v, want %v", size, err, boom)
		}
	}
}

func TestBuilderAbortAndReuse(t *testing.T) {
	b := NewBuilder()
	if _, err := b.Write([]byte("partial")); err != nil {
		t.Fatal(err)
	}
	b.Abort()
	if _, _, err := b.Sum(); !errors.Is(err, ErrAborted) {
		t.Fatalf("Sum after Abort: err = %v, want ErrAborted", err)
	}
	if _, err := b.Write([]byte("more")); err == nil {
		t.Fatal("Write after Abort succeeded")
	}

	b = NewBuilder()
	if _, err := io.WriteString(b, "hello world\n"); err != nil {
		t.Fatal(err)
	}
	c1, _, err1 := b.Sum()
	c2, _, err2 := b.Sum()
	b.Abort() // harmless after Sum
	if err1 != nil || err2 != nil || !c1.Equals(c2) || c1.String() != vectors[1].want {
		t.Fatalf("Sum twice: %s %v, %s %v", c1, err1, c2, err2)
	}
	if _, err := b.Write([]byte("x")); err == nil {
		t.Fatal("Write after Sum succeeded")
	}
}

func TestParse(t *testing.T) {
	good := []struct{ in, want string }{
		{"bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku", "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"},
		{"bafybeig5qzodkcjewuabff2kq5xzklzyy7i4ad2pvneyyykgwc6hr54bk4", "bafybeig5qzodkcjewuabff2kq5xzklzyy7i4ad2pvneyyykgwc6hr54bk4"},
		// CIDv0 of "hello world\n" (dag-pb leaves, the pre-CIDv1 default).
		{"QmT78zSuBmuS4z925WZfrqQ1qHaJ56DQaTfyMUF7F8ff5o", "QmT78zSuBmuS4z925WZfrqQ1qHaJ56DQaTfyMUF7F8ff5o"},
	}
	for _, g := range good {
		c, err := Parse(g.in)
		if err != nil {
			t.Fatalf("Parse(%q): %v", g.in, err)
		}
		if c.String() != g.want || !Valid(g.in) {
			t.Fatalf("Parse(%q) = %s", g.in, c)
		}
	}
	if c, _ := Parse(good[2].in); c.Version() != 0 {
		t.Fatalf("Qm… parsed as version %d", c.Version())
	}
	// The same CIDv1 in another multibase parses to the same CID.
	c0, _ := Parse(good[0].in)
	b58, err := c0.StringOfBase('z')
	if err != nil {
		t.Fatal(err)
	}
	if c, err := Parse(b58); err != nil || !c.Equals(c0) {
		t.Fatalf("Parse(%q) = %s, %v", b58, c, err)
	}

	bad := []string{
		"", "hello", "Qm", "bafy", "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyk",
		"bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku ", "../etc/passwd",
		strings.Repeat("b", 10000),
	}
	for _, s := range bad {
		c, err := Parse(s)
		if err == nil || Valid(s) || c != gocid.Undef {
			t.Fatalf("Parse(%q) = %s, %v; want an error", s, c, err)
		}
		if !strings.Contains(err.Error(), "invalid CID") {
			t.Fatalf("Parse(%q): error %q does not say invalid CID", s, err)
		}
	}
}

// TestComputeBoundedMemory imports 256 MiB and checks that the live heap never
// grows by more than a few MiB (blocks are not kept anywhere).
func TestComputeBoundedMemory(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short")
	}
	const size = 256 << 20
	const limit = 12 << 20

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc

	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > peak.Load() {
				peak.Store(ms.HeapAlloc)
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	})

	start := time.Now()
	c, n, err := Compute(vectorReader(size, 42))
	close(stop)
	wg.Wait()
	if err != nil || n != size {
		t.Fatalf("Compute: %s, %d, %v", c, n, err)
	}
	growth := int64(peak.Load()) - int64(base)
	t.Logf("256 MiB in %v: %s; heap %d KiB before, peak growth %d KiB", time.Since(start).Round(time.Millisecond), c, base>>10, growth>>10)
	if growth > limit {
		t.Fatalf("heap grew by %d KiB while importing 256 MiB; limit %d KiB", growth>>10, limit>>10)
	}
}
