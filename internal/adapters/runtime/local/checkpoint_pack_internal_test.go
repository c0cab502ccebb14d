package local

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// pagesLike is n pages as a gateway's memory has them: runs of repeated words beside random
// bytes.
func pagesLike(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n*pageSize)
	for i := 0; i < len(b); i += 64 {
		if r.IntN(4) == 0 {
			for j := i; j < i+64; j++ {
				b[j] = byte(r.UintN(256))
			}
		} else {
			copy(b[i:i+64], bytes.Repeat([]byte{byte(i >> 12), 0, 0, 0, 0, 0, 0, 0}, 8))
		}
	}
	return b
}

// packing compresses a checkpoint's own pages files (not its parent/'s links to the
// template's, nor its other images), to less than they took; unpacking gives back the same
// bytes under the same names and leaves no packed file; a packed file that was cut short
// fails the unpack, which names it.
func TestPackedCheckpointUnpacksToTheSameBytes(t *testing.T) {
	dir := t.TempDir()
	files := map[string][]byte{
		"pages-1.img":        pagesLike(1, 64),
		"pages-2.img":        pagesLike(2, 512),
		"pagemap-2.img":      []byte("not pages"),
		"parent/pages-2.img": pagesLike(3, 32),
	}
	for name, b := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	plain, packed, err := packCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(len(files["pages-1.img"]) + len(files["pages-2.img"])); plain != want || packed <= 0 || packed >= plain {
		t.Fatalf("packed %d bytes into %d, want %d into fewer", plain, packed, want)
	}
	for _, name := range []string{"pages-1.img", "pages-2.img"} {
		if _, err := os.Stat(filepath.Join(dir, name)); !os.IsNotExist(err) {
			t.Fatalf("%s left plain beside its packed form: %v", name, err)
		}
	}
	for _, name := range []string{"pagemap-2.img", "parent/pages-2.img"} {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || !bytes.Equal(b, files[name]) {
			t.Fatalf("%s changed by the packing: %v", name, err)
		}
	}
	if n, err := unpackCheckpoint(dir); err != nil || n != 2 {
		t.Fatalf("unpacked %d files: %v", n, err)
	}
	for name, want := range files {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || !bytes.Equal(b, want) {
			t.Fatalf("%s after the round trip: %v (%d bytes, want %d)", name, err, len(b), len(want))
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*"+packedSuffix+"*")); len(left) != 0 {
		t.Fatalf("left after unpacking: %v", left)
	}

	if _, _, err := packCheckpoint(dir); err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(dir, "pages-2.img"+packedSuffix)
	st, err := os.Stat(cut)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(cut, st.Size()/2); err != nil {
		t.Fatal(err)
	}
	if _, err := unpackCheckpoint(dir); err == nil || !strings.Contains(err.Error(), "pages-2.img"+packedSuffix) {
		t.Fatalf("unpacking a cut packed file: %v", err)
	}
}
