package localcluster

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// PodLogTails is the last n lines of every container log the kubelet keeps in the cluster's
// directory (pod-logs/<namespace>_<pod>_<uid>/<container>/<restart>.log), each under its
// path, for a failed test to print: a gateway that exited says why there (the API only says
// its exit code). Namespaces lists the pods' namespaces to take; none takes every one.
func (c *Cluster) PodLogTails(n int, namespaces ...string) string {
	root := filepath.Join(c.Dir, "pod-logs")
	var files []string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".log") {
			files = append(files, p)
		}
		return nil
	})
	sort.Strings(files)
	var b strings.Builder
	for _, f := range files {
		rel, _ := filepath.Rel(root, f)
		ns, _, _ := strings.Cut(rel, "_")
		if len(namespaces) > 0 && !slices.Contains(namespaces, ns) {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
		if len(lines) > n {
			lines = lines[len(lines)-n:]
		}
		fmt.Fprintf(&b, "== %s (last %d lines)\n%s\n", rel, len(lines), bytes.Join(lines, []byte("\n")))
	}
	return b.String()
}
