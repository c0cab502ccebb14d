// Command snapshot measures the throughput of a snapshot sync against sha256sum of the same
// bytes, in one run.
//
// It writes a workspace of --size bytes of incompressible random data in --files files, then,
// --rounds times each, interleaved:
//
//   - sync: the Snapshot controller's code path — archive.Write (the deterministic tar the
//     local runtime produces) streamed through controllers/snapshot.StreamArchive into a local disk
//     store's Put (CID computation, write and fsync);
//   - sha256sum: the coreutils tool over the same files.
//
// It prints the best MB/s of each and their ratio (the goal is sync ≥ 0.7 × sha256sum).
//
//	go run ./hack/bench/snapshot [--size 256MiB] [--files 4] [--rounds 3] [--dir /tmp]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	snapshotctrl "github.com/agentplane/agentplane/controllers/snapshot"
	"github.com/agentplane/agentplane/hack/bench/internal/report"
	"github.com/agentplane/agentplane/internal/adapters/archive"
	"github.com/agentplane/agentplane/internal/adapters/storage/local"
)

func main() {
	size := flag.Int64("size", 256<<20, "workspace size in bytes")
	files := flag.Int("files", 4, "number of files the workspace is split into")
	rounds := flag.Int("rounds", 3, "measurements of each (the best counts)")
	dir := flag.String("dir", os.TempDir(), "where the workspace and the store are created")
	jsonOut = report.Flag()
	flag.Parse()
	if err := run(*size, *files, *rounds, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "snapshot bench:", err)
		os.Exit(1)
	}
}

// jsonOut is -json: where the results go for `make bench`.
var jsonOut *string

func run(size int64, nfiles, rounds int, parent string) error {
	root, err := os.MkdirTemp(parent, "agentplane-snapshot-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	ws := filepath.Join(root, "workspace")
	paths, err := writeWorkspace(ws, size, nfiles)
	if err != nil {
		return err
	}
	fmt.Printf("workspace: %d MiB of random data in %d files (%s)\n", size>>20, nfiles, ws)

	var bestSync, bestSum time.Duration
	var cid string
	var stored int64
	for i := range rounds {
		store, err := local.New(filepath.Join(root, fmt.Sprintf("store-%d", i)))
		if err != nil {
			return err
		}
		start := time.Now()
		obj, storeErr, archiveErr := snapshotctrl.StreamArchive(context.Background(), store, "bench/snapshots",
			func(w io.Writer) error { return archive.Write(ws, w) })
		d := time.Since(start)
		if storeErr != nil || archiveErr != nil {
			return fmt.Errorf("sync: store: %v, archive: %v", storeErr, archiveErr)
		}
		if cid != "" && obj.CID != cid {
			return fmt.Errorf("the same workspace gave two CIDs: %s and %s", cid, obj.CID)
		}
		cid, stored = obj.CID, obj.Size
		if err := os.RemoveAll(store.Root()); err != nil {
			return err
		}

		start = time.Now()
		out, err := exec.Command("sha256sum", paths...).CombinedOutput()
		s := time.Since(start)
		if err != nil {
			return fmt.Errorf("sha256sum: %v: %s", err, out)
		}
		fmt.Printf("round %d: sync %s, sha256sum %s\n", i+1, d.Round(time.Millisecond), s.Round(time.Millisecond))
		if bestSync == 0 || d < bestSync {
			bestSync = d
		}
		if bestSum == 0 || s < bestSum {
			bestSum = s
		}
	}
	mbps := func(d time.Duration) float64 { return float64(size) / 1e6 / d.Seconds() }
	fmt.Printf("archive: %s, %d bytes\n", cid, stored)
	fmt.Printf("sync (archive.Write -> StreamArchive -> local Put): %.0f MB/s\n", mbps(bestSync))
	fmt.Printf("sha256sum of the same bytes:                       %.0f MB/s\n", mbps(bestSum))
	fmt.Printf("ratio sync/sha256sum: %.2f (goal >= 0.70)\n", bestSum.Seconds()/bestSync.Seconds())
	return report.Write(*jsonOut, []report.Result{{
		Bench: "snapshot", Row: fmt.Sprintf("%d MiB in %d files, best of %d", size>>20, nfiles, rounds),
		Metric: "sync throughput (archive, CID, local store, fsync)", Value: mbps(bestSync), Unit: "MB/s",
		Baseline: "sha256sum of the same bytes", BaselineValue: mbps(bestSum),
		Ratio: bestSum.Seconds() / bestSync.Seconds(), RatioOf: "sync / sha256sum throughput; goal >= 0.70",
	}})
}

// writeWorkspace writes size random bytes into n files under dir (plus a nested directory, as
// a workspace has) and returns their paths.
func writeWorkspace(dir string, size int64, n int) ([]string, error) {
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		return nil, err
	}
	rng := rand.NewChaCha8([32]byte{'a', 'g', 'e', 'n', 't', 'p', 'l', 'a', 'n', 'e'})
	paths := make([]string, 0, n)
	per := size / int64(n)
	for i := range n {
		chunk := per
		if i == n-1 {
			chunk = size - per*int64(n-1)
		}
		p := filepath.Join(dir, "data", fmt.Sprintf("blob-%d.bin", i))
		f, err := os.Create(p)
		if err != nil {
			return nil, err
		}
		_, err = io.CopyN(f, rng, chunk)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}
