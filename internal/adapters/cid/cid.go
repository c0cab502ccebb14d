// Package cid computes content identifiers exactly like `ipfs add --cid-version=1`
// with kubo's defaults for CIDv1: the bytes are imported as a UnixFS file with
// raw leaves, fixed-size chunks of 262144 bytes ("size-262144"), the balanced
// DAG layout with at most 174 links per node, dag-pb nodes in canonical
// (links-first) field order, and sha2-256, and the root is a CIDv1 printed in
// base32 ("bafy…" for a multi-chunk file, "bafk…" for a file of at most one
// chunk, whose root is its single raw leaf).
//
// The import is done by the boxo UnixFS importer (balanced builder); blocks
// are hashed and discarded as they are produced, so memory stays bounded
// whatever the input size.
package cid

import (
	"context"
	"errors"
	"fmt"
	"io"

	chunker "github.com/ipfs/boxo/chunker"
	dag "github.com/ipfs/boxo/ipld/merkledag"
	"github.com/ipfs/boxo/ipld/unixfs/importer/balanced"
	"github.com/ipfs/boxo/ipld/unixfs/importer/helpers"
	gocid "github.com/ipfs/go-cid"
	ipld "github.com/ipfs/go-ipld-format"
	pool "github.com/libp2p/go-buffer-pool"
)

const (
	// ChunkSize is the fixed chunk size of kubo's default chunker ("size-262144").
	ChunkSize = 262144
	// MaxLinks is the maximum number of links of an internal node of the
	// balanced layout (kubo's default, boxo's helpers.DefaultLinksPerBlock).
	MaxLinks = 174
	// maxStringLen bounds what Parse accepts; real CIDs are far shorter.
	maxStringLen = 512
)

// Compute imports the bytes of r as a UnixFS file the way
// `ipfs add --cid-version=1` does and returns the root CID and the number of
// bytes read. It reads r to EOF in chunks of ChunkSize and never holds more
// than a few chunks and one path of internal nodes in memory. A read error
// other than io.EOF is returned as is (wrapped).
func Compute(r io.Reader) (gocid.Cid, int64, error) {
	// The boxo importer has no per-call knob for the dag-pb field order: it
	// reads a package global. Refuse to produce CIDs that would differ from
	// kubo's if some other package changed it (e.g. a UnixFSProfile).
	if dag.DefaultPBNodeFieldOrder != dag.PBNodeLinksFirst {
		return gocid.Undef, 0, errors.New("cid: merkledag.DefaultPBNodeFieldOrder was changed from links-first; refusing to compute non-standard CIDs")
	}
	cr := &countingReader{r: r}
	params := helpers.DagBuilderParams{
		Dagserv:    discardDAG{},
		Maxlinks:   MaxLinks,
		RawLeaves:  true,
		CidBuilder: dag.V1CidPrefix(),
	}
	db, err := params.New(chunker.NewSizeSplitter(cr, ChunkSize))
	if err != nil {
		return gocid.Undef, 0, fmt.Errorf("cid: %w", err)
	}
	root, err := balanced.Layout(db)
	if err != nil {
		return gocid.Undef, cr.n, fmt.Errorf("cid: import: %w", err)
	}
	return root.Cid(), cr.n, nil
}

// Parse parses a CID string, CIDv0 ("Qm…", base58btc) or CIDv1 (any multibase,
// e.g. "bafy…"), and returns an error that names the input otherwise.
func Parse(s string) (gocid.Cid, error) {
	switch {
	case s == "":
		return gocid.Undef, errors.New("invalid CID: empty string")
	case len(s) > maxStringLen:
		return gocid.Undef, fmt.Errorf("invalid CID: %d characters is too long", len(s))
	}
	c, err := gocid.Decode(s)
	if err != nil {
		return gocid.Undef, fmt.Errorf("invalid CID %q: %w", s, err)
	}
	return c, nil
}

// Valid reports whether s parses as a CIDv0 or CIDv1 string.
func Valid(s string) bool {
	_, err := Parse(s)
	return err == nil
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// discardDAG is an ipld.DAGService that keeps nothing: the importer computes
// every node's CID before adding it, and only the root's CID is wanted.
//
// Add hands the chunk of a raw leaf back to the buffer pool the size
// splitter took it from (this saves allocating and zeroing every chunk and
// makes the import only slightly slower than sha256 alone). That is safe
// because the balanced layout adds a leaf last, after hashing it and linking
// it into its parent (which keeps the CID and sizes only), and never reads a
// leaf's bytes again; the known vectors would catch a boxo change that did.
type discardDAG struct{}

var _ ipld.DAGService = discardDAG{}

func (discardDAG) Get(_ context.Context, c gocid.Cid) (ipld.Node, error) {
	return nil, ipld.ErrNotFound{Cid: c}
}

func (discardDAG) GetMany(_ context.Context, cs []gocid.Cid) <-chan *ipld.NodeOption {
	ch := make(chan *ipld.NodeOption, len(cs))
	for _, c := range cs {
		ch <- &ipld.NodeOption{Err: ipld.ErrNotFound{Cid: c}}
	}
	close(ch)
	return ch
}

func (discardDAG) Add(_ context.Context, n ipld.Node) error {
	if rn, ok := n.(*dag.RawNode); ok {
		pool.Put(rn.RawData())
	}
	return nil
}
func (discardDAG) AddMany(context.Context, []ipld.Node) error    { return nil }
func (discardDAG) Remove(context.Context, gocid.Cid) error       { return nil }
func (discardDAG) RemoveMany(context.Context, []gocid.Cid) error { return nil }
