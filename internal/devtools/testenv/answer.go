package testenv

import (
	"bufio"
	"io"
	"net/http"
	"strings"
)

// ReadAnswer reads an HTTP answer's body for a test that calls routes generically; of a
// stream of server-sent events (which may not end: the fleet's), up to the end of its first
// event.
func ReadAnswer(resp *http.Response) ([]byte, error) {
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return io.ReadAll(resp.Body)
	}
	var out []byte
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		out = append(append(out, sc.Bytes()...), '\n')
		if sc.Text() == "" && strings.Contains(string(out), "data:") {
			return out, nil
		}
	}
	return out, sc.Err()
}
