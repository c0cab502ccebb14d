package monitoring_test

import (
	"bufio"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// sample is one line of a scrape in the text exposition format.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// scrape is every sample of one GET /metrics.
type scrape []sample

// scrapeOf reads url; false when it does not answer 200 with samples.
func scrapeOf(url string) (scrape, bool) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, false
	}
	var out scrape
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s, err := parseSample(line)
		if err != nil {
			return nil, false
		}
		out = append(out, s)
	}
	return out, sc.Err() == nil && len(out) > 0
}

// parseSample parses `name{a="b",...} value` (client_golang writes no timestamps).
func parseSample(line string) (sample, error) {
	s := sample{labels: map[string]string{}}
	i := strings.IndexAny(line, "{ ")
	if i < 0 {
		return s, fmt.Errorf("no value: %q", line)
	}
	s.name, line = line[:i], line[i:]
	if strings.HasPrefix(line, "{") {
		line = line[1:]
		for !strings.HasPrefix(line, "}") {
			eq := strings.Index(line, `="`)
			if eq < 0 {
				return s, fmt.Errorf("bad labels: %q", line)
			}
			key, rest := strings.TrimPrefix(line[:eq], ","), line[eq+2:]
			var val strings.Builder
			j := 0
			for ; j < len(rest) && rest[j] != '"'; j++ {
				if rest[j] == '\\' && j+1 < len(rest) {
					j++
					switch rest[j] {
					case 'n':
						val.WriteByte('\n')
					default:
						val.WriteByte(rest[j])
					}
					continue
				}
				val.WriteByte(rest[j])
			}
			if j >= len(rest) {
				return s, fmt.Errorf("unterminated label value: %q", line)
			}
			s.labels[key] = val.String()
			line = strings.TrimPrefix(rest[j+1:], ",")
		}
		line = line[1:]
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(line), 64)
	s.value = v
	return s, err
}

// match: the sample is of name and carries every label of kv (name, value, name, value, ...).
func (s sample) match(name string, kv []string) bool {
	if s.name != name {
		return false
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if s.labels[kv[i]] != kv[i+1] {
			return false
		}
	}
	return true
}

// sum adds the values of the samples of name that carry the labels kv.
func (sc scrape) sum(name string, kv ...string) float64 {
	total := 0.0
	for _, s := range sc {
		if s.match(name, kv) {
			total += s.value
		}
	}
	return total
}

// has: some sample of name carries the labels kv.
func (sc scrape) has(name string, kv ...string) bool {
	for _, s := range sc {
		if s.match(name, kv) {
			return true
		}
	}
	return false
}

func TestParseSample(t *testing.T) {
	s, err := parseSample(`agentplane_http_requests_total{code="404",method="GET",route="GET /v0/agents/{agentId}",x="a\"b"} 3`)
	if err != nil || s.name != "agentplane_http_requests_total" || s.value != 3 ||
		s.labels["route"] != "GET /v0/agents/{agentId}" || s.labels["code"] != "404" || s.labels["x"] != `a"b` {
		t.Fatalf("%+v %v", s, err)
	}
	if s, err := parseSample(`up 1`); err != nil || s.name != "up" || s.value != 1 {
		t.Fatalf("%+v %v", s, err)
	}
}
