package local

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/checkpoint-restore/go-criu/v7/crit/images/pagemap"
	"google.golang.org/protobuf/proto"
)

// fakeImage is a process's memory as a dump stores it: runs of pages by address.
type fakeImage map[uint64][]byte // vaddr of a run: its pages

// fakeLazyBelow: a fake dump's runs below this address are anonymous memory, which CRIU marks
// lazy (PE_LAZY: a restore on demand leaves them to its page server); the runs above are not.
const fakeLazyBelow = 0x40000

// writeFakeDump writes procs (pid: its memory) as CRIU's pagemap and pages images into dir,
// each process's pages file named by pagesID(pid).
func writeFakeDump(t *testing.T, dir string, procs map[int]fakeImage, pagesID func(int) uint32) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for pid, img := range procs {
		head := &pagemap.PagemapHead{PagesId: proto.Uint32(pagesID(pid))}
		var entries []*pagemap.PagemapEntry
		var pages []byte
		for _, vaddr := range slices.Sorted(maps.Keys(img)) {
			run := img[vaddr]
			flags := uint32(pagePresent)
			if vaddr < fakeLazyBelow {
				flags |= pageLazy
			}
			entries = append(entries, &pagemap.PagemapEntry{Vaddr: proto.Uint64(vaddr), NrPages: proto.Uint32(uint32(len(run) / pageSize)), Flags: proto.Uint32(flags)})
			pages = append(pages, run...)
		}
		if err := writePagemap(filepath.Join(dir, fmt.Sprintf("pagemap-%d.img", pid)), head, entries); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, pagesName(head)), pages, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// readBack is each page of process pid in the images of dir as CRIU's restore reads them: a
// present page from dir's pages file, in order; a page in the parent from dir/parent's image,
// by address.
func readBack(t *testing.T, dir string, pid int) map[uint64][]byte {
	t.Helper()
	name := fmt.Sprintf("pagemap-%d.img", pid)
	head, entries, err := readPagemap(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	own, err := os.ReadFile(filepath.Join(dir, pagesName(head)))
	if err != nil {
		t.Fatal(err)
	}
	var parent map[uint64][]byte
	out := map[uint64][]byte{}
	var off int
	for _, e := range entries {
		for i := range e.GetNrPages() {
			vaddr := e.GetVaddr() + uint64(i)*pageSize
			switch e.GetFlags() &^ pageLazy {
			case pagePresent:
				out[vaddr] = own[off : off+pageSize]
				off += pageSize
			case pageInParent:
				if parent == nil {
					parent = readBack(t, filepath.Join(dir, checkpointParentName), pid)
				}
				p, ok := parent[vaddr]
				if !ok {
					t.Fatalf("pid %d: page %#x is in the parent, which lacks it", pid, vaddr)
				}
				out[vaddr] = p
			default:
				t.Fatalf("pid %d: entry flags %#x", pid, e.GetFlags())
			}
		}
	}
	if off != len(own) {
		t.Fatalf("pid %d: the pages file holds %d bytes, the pagemap names %d", pid, len(own), off)
	}
	return out
}

// lazyOf is, for each page of process pid in dir's pagemap, whether it is marked lazy.
func lazyOf(t *testing.T, dir string, pid int) map[uint64]bool {
	t.Helper()
	_, entries, err := readPagemap(filepath.Join(dir, fmt.Sprintf("pagemap-%d.img", pid)))
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint64]bool{}
	for _, e := range entries {
		for i := range e.GetNrPages() {
			out[e.GetVaddr()+uint64(i)*pageSize] = e.GetFlags()&pageLazy != 0
		}
	}
	return out
}

// pagesOf is img page by page.
func pagesOf(img fakeImage) map[uint64][]byte {
	out := map[uint64][]byte{}
	for vaddr, run := range img {
		for i := 0; i < len(run); i += pageSize {
			out[vaddr+uint64(i)] = run[i : i+pageSize]
		}
	}
	return out
}

func randomPages(rng *rand.Rand, n int) []byte {
	b := make([]byte, n*pageSize)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// TestThinCheckpointKeepsOnlyWhatDiffers: over a template's image and a dump of a copy of it,
// thinning keeps in the dump's pages file only the pages that differ from the template's at
// the same address (a page moved to another address, a page changed, a page the template did
// not have, a process it did not have), marks the others as in the parent, and what a restore
// reads back is the dump's memory, page for page. The parent's files are hard links to the
// template's. A dump with a page changed where the template's pagemap ends is read back whole.
func TestThinCheckpointKeepsOnlyWhatDiffers(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	dir := t.TempDir()
	tpl, ckpt := filepath.Join(dir, "template"), filepath.Join(dir, "checkpoint")
	heap := randomPages(rng, 8)
	code := randomPages(rng, 3)
	writeFakeDump(t, tpl, map[int]fakeImage{1: {0x1000: heap, 0x40000: code}, 7: {0x1000: randomPages(rng, 2)}},
		func(pid int) uint32 { return uint32(pid) })

	changed := bytes.Clone(heap)
	copy(changed[2*pageSize:], randomPages(rng, 1))                   // page 2 changed
	copy(changed[5*pageSize:6*pageSize], heap[6*pageSize:7*pageSize]) // page 5 holds what page 6 holds
	copy(changed[7*pageSize:], bytes.Repeat([]byte{0}, pageSize-1))   // page 7 changed but its last byte
	grown := append(bytes.Clone(code), randomPages(rng, 2)...)        // two pages past the template's run
	dump := map[int]fakeImage{
		1: {0x1000: changed, 0x40000: grown, 0x90000: randomPages(rng, 1)}, // a new run
		2: {0x1000: bytes.Clone(heap)},                                     // a process the template lacks
	}
	writeFakeDump(t, ckpt, dump, func(pid int) uint32 { return uint32(10 + pid) })
	// A shared memory's pagemap is not a process's: left as it is.
	shm := filepath.Join(ckpt, "pagemap-shmem-5.img")
	if err := os.WriteFile(shm, []byte("not thinned"), 0o600); err != nil {
		t.Fatal(err)
	}

	st, err := thinCheckpoint(ckpt, tpl)
	if err != nil {
		t.Fatal(err)
	}
	// Kept: pages 2, 5 and 7 of the heap, the two grown pages, the new run; in the parent:
	// the other 5 heap pages and the 3 code pages.
	if st.kept != 6*pageSize || st.inParent != 8*pageSize {
		t.Errorf("kept %d pages, %d in the parent; want 6 and 8", st.kept/pageSize, st.inParent/pageSize)
	}
	for pid, img := range dump {
		// A page stays lazy or not as it was dumped, kept or in the parent: a restore on
		// demand copies a page it finds not lazy before the gateway runs.
		lazy := lazyOf(t, ckpt, pid)
		for vaddr := range pagesOf(img) {
			if lazy[vaddr] != (vaddr < fakeLazyBelow) {
				t.Errorf("pid %d: page %#x is lazy: %v after thinning, %v as dumped", pid, vaddr, lazy[vaddr], vaddr < fakeLazyBelow)
			}
		}
		got, want := readBack(t, ckpt, pid), pagesOf(img)
		if len(got) != len(want) {
			t.Fatalf("pid %d: read back %d pages, dumped %d", pid, len(got), len(want))
		}
		for vaddr, page := range want {
			if !bytes.Equal(got[vaddr], page) {
				t.Errorf("pid %d: page %#x reads back other bytes than were dumped", pid, vaddr)
			}
		}
	}
	if b, err := os.ReadFile(shm); err != nil || string(b) != "not thinned" {
		t.Errorf("the shared memory's pagemap: %q, %v", b, err)
	}
	for _, f := range []string{"pagemap-1.img", "pages-1.img"} {
		a, errA := os.Stat(filepath.Join(tpl, f))
		b, errB := os.Stat(filepath.Join(ckpt, checkpointParentName, f))
		if errA != nil || errB != nil || a.Sys().(*syscall.Stat_t).Ino != b.Sys().(*syscall.Stat_t).Ino {
			t.Errorf("%s in the checkpoint's parent is not a hard link to the template's (%v, %v)", f, errA, errB)
		}
	}
	if _, err := os.Stat(filepath.Join(ckpt, checkpointParentName, "pagemap-7.img")); err == nil {
		t.Errorf("the parent links a process the checkpoint does not have")
	}
	size, err := checkpointBytes(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	if full := int64(8+5+1+8) * pageSize; size >= full {
		t.Errorf("the thinned checkpoint takes %d bytes, the dump took over %d", size, full)
	}
}

// TestThinCheckpointErrorLeavesTheDump: a template whose pages file is gone cannot be thinned
// against; the dump is left as it was, with no parent.
func TestThinCheckpointErrorLeavesTheDump(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	dir := t.TempDir()
	tpl, ckpt := filepath.Join(dir, "template"), filepath.Join(dir, "checkpoint")
	heap := randomPages(rng, 4)
	writeFakeDump(t, tpl, map[int]fakeImage{1: {0x1000: heap}}, func(int) uint32 { return 1 })
	writeFakeDump(t, ckpt, map[int]fakeImage{1: {0x1000: heap}}, func(int) uint32 { return 9 })
	if err := os.Remove(filepath.Join(tpl, "pages-1.img")); err != nil {
		t.Fatal(err)
	}
	if _, err := thinCheckpoint(ckpt, tpl); err == nil {
		t.Fatal("thinning against a template without its pages succeeded")
	}
	if _, err := os.Stat(filepath.Join(ckpt, checkpointParentName)); err == nil {
		t.Error("a parent dir is left after the error")
	}
	got := readBack(t, ckpt, 1)
	for vaddr, page := range pagesOf(fakeImage{0x1000: heap}) {
		if !bytes.Equal(got[vaddr], page) {
			t.Errorf("page %#x changed", vaddr)
		}
	}
}
