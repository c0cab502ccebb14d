package cid

import (
	"errors"
	"io"
	"sync"

	gocid "github.com/ipfs/go-cid"
)

// ErrAborted is what a Builder's Sum returns after Abort.
var ErrAborted = errors.New("cid: builder aborted")

// Builder computes a CID from bytes written to it, so a caller can tee a
// stream into a file and compute its CID in one pass:
//
//	b := cid.NewBuilder()
//	defer b.Abort()
//	n, err := io.Copy(io.MultiWriter(file, b), r)
//	...
//	c, size, err := b.Sum()
//
// It gives the same result as Compute on the same bytes, with the same bounded
// memory. The import runs in a goroutine fed through a pipe, so every Builder
// must end with Sum or Abort (calling Abort after Sum is harmless).
// A Builder is not safe for concurrent Writes.
type Builder struct {
	pw   *io.PipeWriter
	done chan struct{}
	once sync.Once

	c   gocid.Cid
	n   int64
	err error
}

// NewBuilder starts a Builder.
func NewBuilder() *Builder {
	pr, pw := io.Pipe()
	b := &Builder{pw: pw, done: make(chan struct{})}
	go func() {
		defer close(b.done)
		b.c, b.n, b.err = Compute(pr)
		if b.err == nil {
			// Compute read to EOF, so the writer was closed already; any
			// further Write reports that the builder is finished.
			pr.CloseWithError(errors.New("cid: write after Sum"))
		} else {
			// Make pending and future Writes fail instead of blocking.
			pr.CloseWithError(b.err)
		}
	}()
	return b
}

// Write feeds p to the import. It blocks until the importer has taken the
// bytes, and fails once the import has failed or the Builder has ended.
func (b *Builder) Write(p []byte) (int, error) {
	return b.pw.Write(p)
}

// Sum ends the input and returns the CID and the number of bytes written.
// Further calls return the same result.
func (b *Builder) Sum() (gocid.Cid, int64, error) {
	b.once.Do(func() { _ = b.pw.Close() })
	<-b.done
	return b.c, b.n, b.err
}

// Abort ends the import without a result and releases its goroutine. It is
// a no-op after Sum.
func (b *Builder) Abort() {
	b.once.Do(func() { _ = b.pw.CloseWithError(ErrAborted) })
	<-b.done
}
