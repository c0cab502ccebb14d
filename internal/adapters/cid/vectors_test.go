package cid

import (
	"bytes"
	"io"
	"math/rand/v2"
)

// vector is a known input and the CID `ipfs add --cid-version=1` gives for it.
// Inputs are either literal bytes or size bytes of the deterministic stream
// seeded by seed (see vectorReader). Every expected CID here was checked
// against the independent JavaScript importer by TestAgainstNodeImporter.
type vector struct {
	name string
	data []byte // literal content; nil means generated
	size int64  // generated: number of bytes
	seed uint64 // generated: stream seed
	want string
}

var vectors = []vector{
	{name: "empty", data: []byte{}, want: "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"},
	{name: "hello", data: []byte("hello world\n"), want: "bafkreifjjcie6lypi6ny7amxnfftagclbuxndqonfipmb64f2km2devei4"},
	{name: "one-chunk", size: ChunkSize, seed: 1, want: "bafkreicl2jnivjcro3zfyvodpsvcxq2gmgfagv2gja24ooqvrwwvolnhli"},
	{name: "one-chunk-plus-one", size: ChunkSize + 1, seed: 2, want: "bafybeidgepskklr7rm4mc7ijrw4ojy4s7oh5lkccztmwjfe7lhs6ofwwje"},
	{name: "1MiB+123", size: 1<<20 + 123, seed: 3, want: "bafybeig5qzodkcjewuabff2kq5xzklzyy7i4ad2pvneyyykgwc6hr54bk4"},
	// One more leaf than a single internal node can hold: depth-2 tree.
	{name: "174-chunks-plus-one", size: MaxLinks*ChunkSize + 1, seed: 4, want: "bafybeidx3gcjzre4bhalrnkkrsbiyd3azqjqkhdb54ucwtvs4xcxrwthea"},
}

// open returns the vector's bytes as a stream.
func (v vector) open() io.Reader {
	if v.data != nil {
		return bytes.NewReader(v.data)
	}
	return vectorReader(v.size, v.seed)
}

// length is the vector's size in bytes.
func (v vector) length() int64 {
	if v.data != nil {
		return int64(len(v.data))
	}
	return v.size
}

// vectorReader returns n deterministic pseudo-random bytes (ChaCha8 keyed by
// seed; the Go ChaCha8 stream is specified and stable across releases).
func vectorReader(n int64, seed uint64) io.Reader {
	var key [32]byte
	for i := range 8 {
		key[i] = byte(seed >> (8 * i))
	}
	return io.LimitReader(rand.NewChaCha8(key), n)
}
