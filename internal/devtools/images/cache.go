package images

import (
	"os"
	"path/filepath"
	"strings"
	"time"
)

// unusedFor is how long the cache keeps a tarball no Ensure asked for: each commit's manager
// image (and each test binary's fake gateway image) is new, and without pruning the cache
// would grow by them on every test run.
const unusedFor = 72 * time.Hour

// cacheFile is where Ensure keeps the tarball of s in dir.
func cacheFile(dir string, s Spec) string {
	return filepath.Join(dir, strings.NewReplacer("/", "_", ":", "_").Replace(s.Ref)+"-"+s.key+".tar")
}

// markUsed records that file was asked for now (its mtime), so that prune keeps it.
func markUsed(file string, now time.Time) {
	_ = os.Chtimes(file, now, now)
}

// prune removes the tarballs in dir (and partial ones a crash left) that no Ensure asked for
// within unusedFor of now; any of them is built again from its inputs when asked for.
func prune(dir string, now time.Time) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".tar") && !strings.HasSuffix(name, ".tar.tmp") {
			continue
		}
		if info, err := e.Info(); err == nil && info.Mode().IsRegular() && now.Sub(info.ModTime()) > unusedFor {
			_ = os.Remove(filepath.Join(dir, name))
		}
	}
}
