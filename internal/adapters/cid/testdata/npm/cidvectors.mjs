// Prints, for each file given as an argument, the CID that the JavaScript
// UnixFS importer (ipfs-unixfs-importer) computes for its bytes with the
// settings of `ipfs add --cid-version=1`: CIDv1, raw leaves, fixed-size
// chunks of 262144 bytes, balanced layout with 174 links per node, dag-pb
// links-first field order, sha2-256, a single chunk reduced to its raw leaf.
//
// Output: one line per file, "<cid base32> <size in bytes> <path>".
//
// This is an independent implementation used to check internal/adapters/cid (Go, boxo).
// It runs from the directory that install.sh prints, next to node_modules:
//   node "$(internal/adapters/cid/testdata/install.sh)/cidvectors.mjs" FILE...
import { createReadStream, statSync } from 'node:fs'
import { importer } from 'ipfs-unixfs-importer'
import { fixedSize } from 'ipfs-unixfs-importer/chunker'
import { balanced } from 'ipfs-unixfs-importer/layout'
import { BlackHoleBlockstore } from 'blockstore-core/black-hole'
import { base32 } from 'multiformats/bases/base32'

const options = {
  cidVersion: 1,
  rawLeaves: true,
  reduceSingleLeafToSelf: true,
  wrapWithDirectory: false,
  fieldOrder: 'links-first',
  chunker: fixedSize({ chunkSize: 262144 }),
  layout: balanced({ maxChildrenPerNode: 174 })
}

const files = process.argv.slice(2)
if (files.length === 0) {
  console.error('usage: node cidvectors.mjs FILE...')
  process.exit(2)
}

// Blocks are discarded: only the root CID is needed.
const blockstore = new BlackHoleBlockstore()
for (const path of files) {
  const size = statSync(path).size
  let root
  for await (const entry of importer([{ content: createReadStream(path) }], blockstore, options)) {
    root = entry.cid
  }
  if (root === undefined) {
    console.error(`no CID produced for ${path}`)
    process.exit(1)
  }
  process.stdout.write(`${root.toString(base32)} ${size} ${path}\n`)
}
