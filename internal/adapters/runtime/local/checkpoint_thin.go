package local

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/checkpoint-restore/go-criu/v7/crit"
	"github.com/checkpoint-restore/go-criu/v7/crit/images/pagemap"
	"google.golang.org/protobuf/proto"
)

// A suspended agent born from a template keeps only what differs from it. Its gateway was
// restored from the template's image, so most of its memory is still the template's, page for
// page at the same addresses. After the dump, each process's pages equal to the template's at
// the same address are marked as in the parent image (CRIU's incremental images, PE_PARENT),
// its pages file keeps the others, and the checkpoint's parent/ holds hard links to the
// template's pagemaps and pages files: CRIU's restore reads those pages from there (it opens
// <images>/parent itself). The links are the agent's own: the checkpoint stays whole if the
// template is rebuilt or removed meanwhile, and costs no disk while the template is kept.

// CRIU's pagemap entry flags (criu/include/pagemap.h).
const (
	pageInParent = 1 << 0 // PE_PARENT: the pages are in the parent image
	pageLazy     = 1 << 1 // PE_LAZY: a restore with --lazy-pages leaves the pages to its page server
	pagePresent  = 1 << 2 // PE_PRESENT: the pages are in this image's pages file
)

const (
	pageSize = 4096
	// checkpointParentName is a checkpoint's parent image dir (CRIU's CR_PARENT_LINK).
	checkpointParentName = "parent"
)

// thinCheckpointLocked thins the fresh checkpoint in dir of a gateway born from a template
// against that template's image (thinCheckpoint, below). A checkpoint that cannot be thinned
// is kept whole, and why is logged.
func (a *agent) thinCheckpointLocked(dir string) {
	if a.st.Template == "" {
		return
	}
	image := filepath.Join(a.rt.templateDir(a.st.Template), tplImage)
	if _, err := os.Stat(filepath.Join(image, "inventory.img")); err != nil {
		a.log.Info("the checkpoint keeps all its pages: its template's image is gone", "template", a.st.Template)
		return
	}
	start := time.Now()
	st, err := thinCheckpoint(dir, image)
	if err != nil {
		a.log.Info("the checkpoint keeps all its pages: it could not be thinned against its template", "error", err.Error())
		return
	}
	a.log.Info("checkpoint thinned against the gateway's template", "keptMiB", st.kept>>20, "inTemplateMiB", st.inParent>>20,
		"took", time.Since(start).Round(time.Millisecond))
}

// thinStats are the bytes of pages a thinned checkpoint kept and handed to its parent.
type thinStats struct{ kept, inParent int64 }

// thinCheckpoint thins the checkpoint in dir against the image in parent (its template's): a
// process of dir whose pid has a pagemap in parent keeps in its own pages file only the pages
// that differ from the parent's at the same address. Nothing in dir changes until every
// process is thinned; on an error dir is left as the dump made it.
func thinCheckpoint(dir, parent string) (thinStats, error) {
	var st thinStats
	pagemaps, err := filepath.Glob(filepath.Join(dir, "pagemap-*.img"))
	if err != nil {
		return st, err
	}
	pdir := filepath.Join(dir, checkpointParentName)
	if err := os.RemoveAll(pdir); err != nil {
		return st, err
	}
	if err := os.Mkdir(pdir, 0o700); err != nil {
		return st, err
	}
	var renames [][2]string
	done := false
	defer func() {
		if done {
			return
		}
		for _, r := range renames {
			_ = os.Remove(r[0]) // the temporary files left by an error
		}
		_ = os.RemoveAll(pdir)
	}()
	for _, pm := range pagemaps {
		name := filepath.Base(pm)
		if !taskPagemap.MatchString(name) {
			continue // a shared memory's pagemap (pagemap-shmem-<id>.img)
		}
		if _, err := os.Stat(filepath.Join(parent, name)); errors.Is(err, fs.ErrNotExist) {
			continue // a process the template did not have
		}
		r, s, err := thinProcess(dir, parent, name)
		if err != nil {
			return st, fmt.Errorf("%s: %w", name, err)
		}
		renames = append(renames, r...)
		st.kept += s.kept
		st.inParent += s.inParent
	}
	done = true
	for _, r := range renames {
		if err := os.Rename(r[0], r[1]); err != nil {
			return st, err // a checkpoint half thinned fails its restore: the agent starts anew
		}
	}
	return st, nil
}

// taskPagemap names a process's pagemap image.
var taskPagemap = regexp.MustCompile(`^pagemap-[0-9]+\.img$`)

// thinProcess thins the process whose pagemap is name (pagemap-<pid>.img) into temporary
// files, after linking the parent's pagemap and pages file into dir/parent; it returns the
// renames that put them in place.
func thinProcess(dir, parent, name string) ([][2]string, thinStats, error) {
	var st thinStats
	pdir := filepath.Join(dir, checkpointParentName)
	phead, pentries, err := readPagemap(filepath.Join(parent, name))
	if err != nil {
		return nil, st, err
	}
	ppages := pagesName(phead)
	for _, f := range []string{name, ppages} {
		if err := os.Link(filepath.Join(parent, f), filepath.Join(pdir, f)); err != nil {
			return nil, st, err // across file systems too: a copy would cost what thinning saves
		}
	}
	pf, err := os.Open(filepath.Join(pdir, ppages))
	if err != nil {
		return nil, st, err
	}
	defer pf.Close()
	head, entries, err := readPagemap(filepath.Join(dir, name))
	if err != nil {
		return nil, st, err
	}
	own := filepath.Join(dir, pagesName(head))
	in, err := os.Open(own)
	if err != nil {
		return nil, st, err
	}
	defer in.Close()
	out, err := os.OpenFile(own+".thin", os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, st, err
	}
	defer out.Close()
	w := bufio.NewWriterSize(out, 1<<20)
	t := &thinner{r: bufio.NewReaderSize(in, 1<<20), w: w, parent: presentRanges(pentries), pf: pf}
	var thinned []*pagemap.PagemapEntry
	for _, e := range entries {
		runs, err := t.entry(e)
		if err != nil {
			return nil, st, err
		}
		thinned = append(thinned, runs...)
	}
	if err := w.Flush(); err != nil {
		return nil, st, err
	}
	if err := out.Close(); err != nil {
		return nil, st, err
	}
	if err := writePagemap(filepath.Join(dir, name)+".thin", head, thinned); err != nil {
		return nil, st, err
	}
	return [][2]string{{own + ".thin", own}, {filepath.Join(dir, name) + ".thin", filepath.Join(dir, name)}}, t.st, nil
}

// pagesName is the pages file a pagemap's head names.
func pagesName(head *pagemap.PagemapHead) string {
	return fmt.Sprintf("pages-%d.img", head.GetPagesId())
}

// readPagemap decodes a pagemap image: its head and its entries.
func readPagemap(path string) (*pagemap.PagemapHead, []*pagemap.PagemapEntry, error) {
	img, err := readImage(path, "PAGEMAP", &pagemap.PagemapEntry{})
	if err != nil {
		return nil, nil, err
	}
	if len(img.Entries) == 0 {
		return nil, nil, errors.New("a pagemap without entries")
	}
	head, ok := img.Entries[0].Message.(*pagemap.PagemapHead)
	if !ok {
		return nil, nil, errors.New("a pagemap without its head")
	}
	entries := make([]*pagemap.PagemapEntry, 0, len(img.Entries)-1)
	for _, e := range img.Entries[1:] {
		pe, ok := e.Message.(*pagemap.PagemapEntry)
		if !ok {
			return nil, nil, fmt.Errorf("a pagemap entry of type %T", e.Message)
		}
		entries = append(entries, pe)
	}
	return head, entries, nil
}

// writePagemap encodes a pagemap image at path.
func writePagemap(path string, head *pagemap.PagemapHead, entries []*pagemap.PagemapEntry) error {
	img := &crit.CriuImage{Magic: "PAGEMAP", Entries: []*crit.CriuEntry{{Message: head}}}
	for _, e := range entries {
		img.Entries = append(img.Entries, &crit.CriuEntry{Message: e})
	}
	return writeImage(path, img)
}

// pageRange is a run of pages present in a pages file: from vaddr, nr pages, at off.
type pageRange struct {
	vaddr, off uint64
	nr         uint32
}

// presentRanges are the runs of entries whose pages are in their pages file, with where.
func presentRanges(entries []*pagemap.PagemapEntry) []pageRange {
	var out []pageRange
	var off uint64
	for _, e := range entries {
		if e.GetFlags()&pagePresent != 0 {
			out = append(out, pageRange{vaddr: e.GetVaddr(), off: off, nr: e.GetNrPages()})
			off += uint64(e.GetNrPages()) * pageSize
		}
	}
	return out
}

// thinner splits a process's pagemap entries into runs kept and runs in the parent, writing
// the kept pages.
type thinner struct {
	r      io.Reader // the process's pages, in order
	w      io.Writer // the pages kept
	parent []pageRange
	pf     io.ReaderAt // the parent's pages
	st     thinStats
	// page and ppage hold a page of the process and the parent's at its address.
	page, ppage [pageSize]byte
}

// entry is e split into runs of pages kept (e's flags) and runs equal to the parent's.
func (t *thinner) entry(e *pagemap.PagemapEntry) ([]*pagemap.PagemapEntry, error) {
	if e.GetFlags()&pagePresent == 0 {
		return []*pagemap.PagemapEntry{e}, nil
	}
	var runs []*pagemap.PagemapEntry
	page, ppage := t.page[:], t.ppage[:]
	for i := uint32(0); i < e.GetNrPages(); i++ {
		vaddr := e.GetVaddr() + uint64(i)*pageSize
		if _, err := io.ReadFull(t.r, page); err != nil {
			return nil, err
		}
		same, err := t.parentHas(vaddr, page, ppage)
		if err != nil {
			return nil, err
		}
		flags := e.GetFlags()
		if same {
			// Still lazy: without it a restore on demand would copy every page equal to
			// the template's before the gateway runs (hack/criu/patches/0006 serves them).
			flags = pageInParent | e.GetFlags()&pageLazy
			t.st.inParent += pageSize
		} else {
			if _, err := t.w.Write(page); err != nil {
				return nil, err
			}
			t.st.kept += pageSize
		}
		if n := len(runs); n > 0 && runs[n-1].GetFlags() == flags {
			runs[n-1].NrPages = proto.Uint32(runs[n-1].GetNrPages() + 1)
			continue
		}
		runs = append(runs, &pagemap.PagemapEntry{Vaddr: proto.Uint64(vaddr), NrPages: proto.Uint32(1), Flags: proto.Uint32(flags)})
	}
	return runs, nil
}

// parentHas reports whether the parent holds page at vaddr (buf: room for the parent's).
func (t *thinner) parentHas(vaddr uint64, page, buf []byte) (bool, error) {
	i := sort.Search(len(t.parent), func(i int) bool {
		return t.parent[i].vaddr+uint64(t.parent[i].nr)*pageSize > vaddr
	})
	if i == len(t.parent) || t.parent[i].vaddr > vaddr {
		return false, nil
	}
	r := t.parent[i]
	if _, err := t.pf.ReadAt(buf, int64(r.off+(vaddr-r.vaddr))); err != nil {
		return false, err
	}
	return bytes.Equal(page, buf), nil
}

// checkpointBytes is the disk a checkpoint dir takes of its own: its files, but those of its
// parent image (hard links to its template's).
func checkpointBytes(dir string) (int64, error) {
	all, _, err := checkpointFiles(dir)
	return all, err
}

// checkpointFiles is the disk a checkpoint dir's own files take (not its parent image's):
// all of them, and its pages files, plain and packed.
func checkpointFiles(dir string) (all, pages int64, err error) {
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasSuffix(path, string(filepath.Separator)+checkpointParentName) {
			return filepath.SkipDir
		}
		if info, err := d.Info(); err == nil && info.Mode().IsRegular() {
			all += info.Size()
			if ownPagesFile.MatchString(d.Name()) {
				pages += info.Size()
			}
		}
		return nil
	})
	return all, pages, err
}

// checkpointPages counts the bytes of pages of a checkpoint's processes: those in its own pages
// files and those its pagemaps leave in its parent image.
func checkpointPages(dir string) (own, inParent int64, err error) {
	pagemaps, err := filepath.Glob(filepath.Join(dir, "pagemap-*.img"))
	if err != nil {
		return 0, 0, err
	}
	for _, pm := range pagemaps {
		if !taskPagemap.MatchString(filepath.Base(pm)) {
			continue
		}
		_, entries, err := readPagemap(pm)
		if err != nil {
			return 0, 0, err
		}
		for _, e := range entries {
			n := int64(e.GetNrPages()) * pageSize
			switch {
			case e.GetFlags()&pagePresent != 0:
				own += n
			case e.GetFlags()&pageInParent != 0:
				inParent += n
			}
		}
	}
	return own, inParent, nil
}

// CheckpointSize is the disk the checkpoint in dir (an agent's <AgentDir>/checkpoint) takes
// of its own, and how much it would take whole: its files, its pages plain (a packed pages
// file counted at its pages' size) and the pages it leaves to its template's image (what a
// dump neither thinned nor packed stores).
func CheckpointSize(dir string) (own, whole int64, err error) {
	own, files, err := checkpointFiles(dir)
	if err != nil {
		return 0, 0, err
	}
	pages, inParent, err := checkpointPages(dir)
	if err != nil {
		return 0, 0, err
	}
	return own, own - files + pages + inParent, nil
}
