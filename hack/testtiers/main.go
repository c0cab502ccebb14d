// Command testtiers lists the packages of one test tier, for the Makefile's test-unit,
// test-envtest, test-engine and test-node targets:
//
//	go run ./hack/testtiers unit     # nothing but Go in the test's process
//	go run ./hack/testtiers tools    # programs of this machine (node, npm, helm, the engine double)
//	go run ./hack/testtiers envtest  # a real kube-apiserver and etcd (envtest)
//	go run ./hack/testtiers engine   # the real OpenClaw engine (and the control plane)
//	go run ./hack/testtiers node     # a real node: containerd, the kubelet (root)
//	go run ./hack/testtiers -all     # every package with tests and its tier
//
// A package's tier is the heaviest thing its own tests start, read from what they import and
// name (see tierOf), so a new package lands in its tier without a list to keep. `make test`
// runs every tier at once (`go test ./...`: packages run side by side).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

func main() {
	all := flag.Bool("all", false, "print every package with tests and its tier")
	flag.Parse()
	want := flag.Arg(0)
	if !*all && !validTier(want) {
		fmt.Fprintf(os.Stderr, "usage: testtiers unit|tools|envtest|engine|node, or -all\n")
		os.Exit(2)
	}
	pkgs, err := listPackages()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, p := range pkgs {
		if len(p.TestGoFiles)+len(p.XTestGoFiles) == 0 {
			continue
		}
		t := tierOf(p, readTests(p))
		switch {
		case *all:
			fmt.Printf("%-8s %s\n", t, p.ImportPath)
		case string(t) == want:
			fmt.Println(p.ImportPath)
		}
	}
}

// listPackages is `go list -json ./...` from the current directory.
func listPackages() ([]pkg, error) {
	cmd := exec.Command("go", "list", "-json", "./...")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	var pkgs []pkg
	for dec := json.NewDecoder(out); ; {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			return nil, err
		}
		pkgs = append(pkgs, p)
	}
	return pkgs, cmd.Wait()
}

// readTests is the text of p's test files.
func readTests(p pkg) string {
	var b strings.Builder
	for _, f := range append(append([]string{}, p.TestGoFiles...), p.XTestGoFiles...) {
		raw, err := os.ReadFile(filepath.Join(p.Dir, f))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		b.Write(raw)
	}
	return b.String()
}
