package local

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"
)

// An agent that has slept CheckpointPackAfter keeps its checkpoint's own pages compressed
// (zstd): a gateway's memory (V8's heaps, Node's code) compresses four to five times, and
// most agents of a fleet sleep long. Unpacking them costs a wake about a second for a
// gateway's 400 MiB, so an agent that sleeps briefly (the one most likely to be woken again
// soon) keeps them plain. A checkpoint's parent/ (hard links to its template's image, which
// every copy's restore reads) is never packed.

const (
	// DefaultCheckpointPackAfter is how long a suspended agent sleeps before its checkpoint's
	// pages are compressed, when Options.CheckpointPackAfter is 0.
	DefaultCheckpointPackAfter = 10 * time.Minute
	// packedSuffix ends a packed pages file's name (pages-<id>.img.zst).
	packedSuffix = ".zst"
)

// packDueLocked packs the checkpoint of an agent that has slept its runtime's
// CheckpointPackAfter and says when to look again (noTimer: nothing left to pack).
func (a *agent) packDueLocked() time.Duration {
	after := a.rt.opts.CheckpointPackAfter
	if !a.st.Checkpoint || a.st.CheckpointPacked || a.st.CheckpointAt.IsZero() || after < 0 {
		return noTimer
	}
	if wait := time.Until(a.st.CheckpointAt.Add(after)); wait > 0 {
		return wait
	}
	start := time.Now()
	plain, packed, err := packCheckpoint(filepath.Join(a.dir, checkpointDirName))
	// Packed once, also after an error: the files it could not pack stay plain, which the
	// restore reads as they are.
	a.st.CheckpointPacked = true
	a.saveLocked()
	if err != nil {
		a.log.Info("the checkpoint's pages stay plain: they could not be compressed", "error", err.Error())
		return noTimer
	}
	a.log.Info("checkpoint compressed", "slept", time.Since(a.st.CheckpointAt).Round(time.Second),
		"plainMiB", plain>>20, "packedMiB", packed>>20, "took", time.Since(start).Round(time.Millisecond))
	return noTimer
}

// ownPagesFile matches the name of a checkpoint's pages file, plain or packed.
var ownPagesFile = regexp.MustCompile(`^pages-[0-9]+\.img(` + regexp.QuoteMeta(packedSuffix) + `)?$`)

// ownPagesFiles lists the pages files of the checkpoint in dir (not those of its parent/),
// plain and packed.
func ownPagesFiles(dir string) (plain, packed []string, err error) {
	if plain, err = filepath.Glob(filepath.Join(dir, "pages-*.img")); err != nil {
		return nil, nil, err
	}
	packed, err = filepath.Glob(filepath.Join(dir, "pages-*.img"+packedSuffix))
	return plain, packed, err
}

// packCheckpoint compresses each of the checkpoint's own plain pages files into
// <name>.zst and removes the plain one; it returns the bytes before and after. A file is
// replaced only once its packed form is whole (written and renamed into place), so a
// checkpoint is readable at every step, also after an error.
func packCheckpoint(dir string) (plain, packed int64, err error) {
	files, _, err := ownPagesFiles(dir)
	if err != nil {
		return 0, 0, err
	}
	var mu sync.Mutex
	err = eachFile(files, func(f string) error {
		in, out, err := packFile(f)
		mu.Lock()
		plain, packed = plain+in, packed+out
		mu.Unlock()
		return err
	})
	return plain, packed, err
}

// unpackCheckpoint writes the plain pages files of a packed checkpoint back (CRIU reads only
// plain images), removes the packed ones and says how many there were.
func unpackCheckpoint(dir string) (int, error) {
	_, files, err := ownPagesFiles(dir)
	if err != nil {
		return 0, err
	}
	return len(files), eachFile(files, unpackFile)
}

// eachFile runs do on each file, side by side, and joins their errors.
func eachFile(files []string, do func(string) error) error {
	errs := make([]error, len(files))
	var wg sync.WaitGroup
	for i, f := range files {
		wg.Go(func() { errs[i] = do(f) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// packFile compresses the plain pages file path into path.zst, then removes path.
func packFile(path string) (in, out int64, err error) {
	st, err := os.Stat(path)
	if err != nil {
		return 0, 0, err
	}
	err = replaceFile(path, path+packedSuffix, func(src io.Reader, dst io.Writer) error {
		enc, err := zstd.NewWriter(dst, zstd.WithEncoderLevel(zstd.SpeedDefault))
		if err != nil {
			return err
		}
		if _, err := io.Copy(enc, src); err != nil {
			enc.Close()
			return err
		}
		return enc.Close()
	})
	if err != nil {
		return 0, 0, fmt.Errorf("compress %s: %w", filepath.Base(path), err)
	}
	packed, err := os.Stat(path + packedSuffix)
	if err != nil {
		return st.Size(), 0, err
	}
	return st.Size(), packed.Size(), nil
}

// unpackFile decompresses the packed pages file path (<name>.zst) into <name>, then removes
// path.
func unpackFile(path string) error {
	err := replaceFile(path, strings.TrimSuffix(path, packedSuffix), func(src io.Reader, dst io.Writer) error {
		dec, err := zstd.NewReader(src)
		if err != nil {
			return err
		}
		defer dec.Close()
		_, err = io.Copy(dst, dec)
		return err
	})
	if err != nil {
		return fmt.Errorf("decompress %s: %w", filepath.Base(path), err)
	}
	return nil
}

// replaceFile writes what convert makes of from into to (through a temporary file renamed
// into place) and then removes from.
func replaceFile(from, to string, convert func(io.Reader, io.Writer) error) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	tmp := to + ".tmp"
	dst, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(dst, 1<<20)
	err = convert(bufio.NewReaderSize(src, 1<<20), w)
	if err == nil {
		err = w.Flush()
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, to)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return os.Remove(from)
}
