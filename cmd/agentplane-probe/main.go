// Command agentplane-probe is the gateway container's health probe (an exec probe of the
// kube runtime, shipped in agentplane's gateway image): it GETs each URL and succeeds only when
// every answer is 200 with the engine's probe body, a JSON object whose "ok" or "ready" is true.
// An HTTP probe cannot tell that body from the 200 the engine gives any unknown path.
//
//	agentplane-probe http://127.0.0.1:18789/readyz
//
// It prints why it failed (the kubelet shows that in the pod's events) and exits 1.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: agentplane-probe URL...")
		os.Exit(2)
	}
	c := &http.Client{Timeout: 4 * time.Second}
	for _, u := range os.Args[1:] {
		if err := check(c, u); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
	}
}

// check is nil when url answers 200 with {"ok": true} or {"ready": true}.
func check(c *http.Client, url string) error {
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	var body struct {
		OK     *bool  `json:"ok"`
		Ready  *bool  `json:"ready"`
		Status string `json:"status"`
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s %.200s", url, resp.Status, b)
	}
	if err := json.Unmarshal(b, &body); err != nil || body.OK == nil && body.Ready == nil {
		return fmt.Errorf("%s: 200 without the engine's probe body: %.200q", url, b)
	}
	if body.OK != nil && !*body.OK || body.Ready != nil && !*body.Ready {
		return fmt.Errorf("%s: not healthy: %.200s", url, b)
	}
	return nil
}
