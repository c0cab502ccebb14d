// Command netcheck is the local cluster test's network probe, run in pods of an image that
// holds only it:
//
//	netcheck serve ADDR           answers GET / with "netcheck" on ADDR
//	netcheck get NAME WANTIP URL  resolves NAME (the pod's resolv.conf, search domains
//	                              included), exits 2 unless it resolves to WANTIP, then GETs
//	                              URL (retrying for 20 s) and exits 3 unless it
//	                              answers "netcheck"; with NETCHECK_SETTLE (a
//	                              duration) it waits that long before the first GET
//	netcheck tls URL...           GETs each URL over TLS verified with the pod's
//	                              service-account CA and exits 4 unless each answers 200
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"time"
)

func main() {
	switch {
	case len(os.Args) == 3 && os.Args[1] == "serve":
		http.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "netcheck") })
		fmt.Fprintln(os.Stderr, http.ListenAndServe(os.Args[2], nil))
		os.Exit(1)
	case len(os.Args) == 5 && os.Args[1] == "get":
		os.Exit(get(os.Args[2], os.Args[3], os.Args[4]))
	case len(os.Args) > 2 && os.Args[1] == "tls":
		os.Exit(verify(os.Args[2:]))
	}
	fmt.Fprintln(os.Stderr, "usage: netcheck serve ADDR | netcheck get NAME WANTIP URL | netcheck tls URL...")
	os.Exit(64)
}

func get(name, want, url string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r := &net.Resolver{PreferGo: true}
	ips, err := r.LookupHost(ctx, name)
	fmt.Println("lookup", name, ips, err)
	if err != nil || !slices.Contains(ips, want) {
		return 2
	}
	// Tries for 20 seconds: a new pod's address may reach the node's firewall (a policy's
	// sets) a moment after the pod starts. A pod that must be refused waits that moment out
	// first (NETCHECK_SETTLE), or its first try could pass before the firewall knows it.
	if d, err := time.ParseDuration(os.Getenv("NETCHECK_SETTLE")); err == nil {
		time.Sleep(d)
	}
	var last error
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(time.Second) {
		hc := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := hc.Get(url)
		if err != nil {
			last = err
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println("get", url, resp.Status, string(b))
		if string(b) == "netcheck" {
			return 0
		}
		last = fmt.Errorf("answered %q", b)
	}
	fmt.Println("get", url, last)
	return 3
}

func verify(urls []string) int {
	ca, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/ca.crt")
	if err != nil {
		fmt.Println(err)
		return 4
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		fmt.Println("no certificate in ca.crt")
		return 4
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	for _, u := range urls {
		resp, err := hc.Get(u)
		if err != nil {
			fmt.Println("get", u, err)
			return 4
		}
		resp.Body.Close()
		fmt.Println("get", u, resp.Status)
		if resp.StatusCode != http.StatusOK {
			return 4
		}
	}
	return 0
}
