package hostile

import (
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// attempt is one hostile request to an operation.
type attempt struct {
	// what says what is hostile about it (failure messages).
	what string
	// segs are escaped path segments by parameter name (absent: the real ID).
	segs map[string]string
	// query is the raw query string ("" for none).
	query string
	// auth are the Authorization header values (none: no header).
	auth []string
	body body
	// chunked sends the body with Transfer-Encoding: chunked.
	chunked bool
	// header are extra headers.
	header http.Header
}

const (
	alnum    = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	segChars = alnum + "-._~!$&'()*+,;=:@"
)

// segment is a hostile path-parameter value, already escaped.
type segment struct{ what, seg string }

// segments are the hostile path-parameter values; the first seven are required.
func segments(rng *rand.Rand, real string) []segment {
	return []segment{
		{"real ID", url.PathEscape(real)},
		{"random junk ID", randString(rng, 1+rng.IntN(40), segChars)},
		{"10k-character ID", randString(rng, 10000, alnum)},
		{"unicode ID", url.PathEscape("агент-💥-\u202e-名前-" + randString(rng, 4, alnum))},
		{"..", ".."},
		{"encoded slash", url.PathEscape(real) + "%2F..%2F" + randString(rng, 3, alnum)},
		{"%00", url.PathEscape(real) + "%00"},
		{"%2e%2e", "%2e%2e"},
		{".", "."},
		{"empty", ""},
		{"lone %2F", "%2F"},
		{"CRLF", "x%0d%0aX-Injected:%201"},
		{"upper-case ID", url.PathEscape(strings.ToUpper(real))},
		{"encoded percent", "%25zz"},
		{"JSON ID", "%7B%22%24ne%22%3Anull%7D"},
		{"space", "a%20b"},
		{"leading dash", "-" + url.PathEscape(real)},
	}
}

// authVariants are Authorization headers other than a plain valid token; the first two
// (invalid, none) are required.
func authVariants(rng *rand.Rand, tok string) []struct {
	what string
	vals []string
} {
	junk := randString(rng, 32, alnum)
	tampered := tok[:len(tok)-2] + "xx"
	return []struct {
		what string
		vals []string
	}{
		{"invalid token", []string{"Bearer eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJ4In0." + junk}},
		{"no token", nil},
		{"tampered token", []string{"Bearer " + tampered}},
		{"opaque token", []string{"Bearer gw-" + junk}},
		{"basic auth", []string{"Basic aG9zdGlsZTpob3N0aWxl"}},
		{"empty bearer", []string{"Bearer "}},
		{"lower-case scheme", []string{"bearer " + tok}},
		{"token without scheme", []string{tok}},
		{"alg none", []string{"Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJob3N0aWxlLW93bmVyIn0."}},
		{"token with spaces", []string{"Bearer  " + tok + " trailing"}},
	}
}

// plan builds the attempts for op: every required kind of hostile input once, then optional
// ones up to budget, then random mixtures if the budget is still not spent.
func plan(op operation, fix *fixture, rng *rand.Rand, budget int) []attempt {
	valid := []string{"Bearer " + fix.token}
	var bodies, extraBodies []body
	if op.Multipart {
		bodies, extraBodies = multipartBodies(op, rng)
	} else {
		bodies, extraBodies = jsonBodies(op, rng)
	}
	sampleReq := body{what: "sample body", payload: payload{data: sampleBody(op)}, contentType: jsonType}
	if op.Multipart {
		sampleReq = multipartSample()
	}
	small := func() body { // a random hostile body that is not huge
		for {
			if b := bodies[rng.IntN(len(bodies))]; b.payload.filler == 0 {
				return b
			}
		}
	}
	var must, extra []attempt
	for _, b := range bodies {
		must = append(must, attempt{what: b.what, auth: valid, body: b})
	}
	for _, b := range extraBodies {
		extra = append(extra, attempt{what: b.what, auth: valid, body: b})
	}
	// Path parameters: the sample body, so that handlers get as far as looking the ID up.
	for _, p := range op.Params {
		for i, s := range segments(rng, fix.ids[p]) {
			a := attempt{what: p + ": " + s.what, segs: map[string]string{p: s.seg}, auth: valid, body: sampleReq}
			if i < 7 {
				must = append(must, a)
			} else {
				extra = append(extra, a)
			}
		}
	}
	for _, name := range sortedKeys(op.Query) {
		for i, v := range queryValues(rng, name, op.Query[name]) {
			a := attempt{what: "query " + v, query: v, auth: valid, body: sampleReq}
			if i == 0 {
				must = append(must, a)
			} else {
				extra = append(extra, a)
			}
		}
	}
	if len(op.Query) > 0 {
		extra = append(extra, attempt{what: "junk query", query: randString(rng, 2000, segChars+"=&?/%"), auth: valid, body: sampleReq})
	}
	for i, v := range authVariants(rng, fix.token) {
		a := attempt{what: v.what, auth: v.vals, body: small()}
		if i < 2 {
			must = append(must, a)
		} else {
			extra = append(extra, a)
		}
	}
	must = append(must, attempt{what: "huge body, no token", body: hugeBody(op)})
	must = append(must, headerAttempts(rng, fix.token, hugeBody(op), small)...)
	extra = append(extra, extraHeaderAttempts(rng, fix.token, small)...)
	rng.Shuffle(len(extra), func(i, j int) { extra[i], extra[j] = extra[j], extra[i] })
	out := must
	for len(out) < budget && len(extra) > 0 {
		out, extra = append(out, extra[0]), extra[1:]
	}
	for len(out) < budget {
		out = append(out, mixture(op, fix, rng, small()))
	}
	return out
}

// headerAttempts are the required odd-header attempts.
func headerAttempts(rng *rand.Rand, tok string, huge body, small func() body) []attempt {
	valid := []string{"Bearer " + tok}
	junk := "Bearer " + randString(rng, 40, alnum)
	long := http.Header{"X-Request-Id": {randString(rng, 64<<10, alnum)}, "User-Agent": {randString(rng, 192<<10, segChars)}}
	b := small()
	wrongCT := b
	wrongCT.contentType = []string{"text/plain", "application/xml", "multipart/form-data", "application/x-www-form-urlencoded",
		"application/json; charset=utf-16", "garbage/;;;=", "application/json, text/html"}[rng.IntN(7)]
	return []attempt{
		{what: "duplicate Authorization (valid first)", auth: []string{valid[0], junk}, body: small()},
		{what: "duplicate Authorization (junk first)", auth: []string{junk, valid[0]}, body: small()},
		{what: "very long header values", auth: valid, body: small(), header: long},
		{what: "wrong Content-Type " + wrongCT.contentType + " with " + b.what, auth: valid, body: wrongCT},
		{what: "chunked " + b.what, auth: valid, body: b, chunked: true},
		{what: "chunked huge body", auth: valid, body: huge, chunked: true},
	}
}

// extraHeaderAttempts are optional odd-header attempts.
func extraHeaderAttempts(rng *rand.Rand, tok string, small func() body) []attempt {
	h := func(k, v string) http.Header { return http.Header{k: {v}} }
	mk := func(what string, hdr http.Header) attempt {
		return attempt{what: what, auth: []string{"Bearer " + tok}, header: hdr, body: small()}
	}
	return []attempt{
		{what: "long Authorization", auth: []string{"Bearer " + randString(rng, 128<<10, alnum)}, body: small()},
		mk("long workspace header", h("X-Agentplane-Workspace", randString(rng, 32<<10, alnum))),
		mk("Expect: 100-continue", h("Expect", "100-continue")),
		mk("gzip Content-Encoding", h("Content-Encoding", "gzip")),
		mk("many headers", manyHeaders(rng)),
	}
}

// manyHeaders is a few hundred headers of random names.
func manyHeaders(rng *rand.Rand) http.Header {
	hdr := http.Header{}
	for range 300 {
		hdr.Add("X-Hostile-"+randString(rng, 8, alnum), randString(rng, 64, segChars))
	}
	return hdr
}

// mixture is a random combination: hostile path, auth and body together.
func mixture(op operation, fix *fixture, rng *rand.Rand, b body) attempt {
	a := attempt{what: "mixture: " + b.what, auth: []string{"Bearer " + fix.token}, body: b, chunked: rng.IntN(4) == 0}
	if len(op.Params) > 0 {
		p := op.Params[rng.IntN(len(op.Params))]
		segs := segments(rng, fix.ids[p])
		s := segs[rng.IntN(len(segs))]
		a.segs, a.what = map[string]string{p: s.seg}, a.what+", "+p+": "+s.what
	}
	if rng.IntN(3) == 0 {
		v := authVariants(rng, fix.token)
		x := v[rng.IntN(len(v))]
		a.auth, a.what = x.vals, a.what+", "+x.what
	}
	return a
}

// multipartSample is a well-formed upload of a small file.
func multipartSample() body {
	data := "--hostile\r\nContent-Disposition: form-data; name=\"file\"; filename=\"s.txt\"\r\n\r\nsample\r\n--hostile--\r\n"
	return body{what: "sample upload", payload: payload{data: []byte(data)}, contentType: "multipart/form-data; boundary=hostile"}
}

// urlPath is op's path with real IDs, except the escaped segments of a.
func urlPath(op operation, fix *fixture, segs map[string]string) string {
	return paramRE.ReplaceAllStringFunc(op.Path, func(m string) string {
		name := m[1 : len(m)-1]
		if s, ok := segs[name]; ok {
			return s
		}
		return url.PathEscape(fix.ids[name])
	})
}

// queryValues are hostile name=value queries (raw) for a query parameter of type typ, the
// first chosen at random.
func queryValues(rng *rand.Rand, name, typ string) []string {
	var vals []string
	switch typ {
	case "integer", "number":
		vals = []string{"-1", "0", "1e400", "99999999999999999999", "abc", "", "1.5", "0x10"}
	case "object":
		return []string{name + "[%00]=" + url.QueryEscape("\x00"), name + "=x", name + "[]=1&" + name + "[]=2",
			name + "[" + randString(rng, 5000, alnum) + "]=v"}
	default:
		vals = []string{"junk", "", randString(rng, 10000, alnum), "агент\u202e", "%00", "'; DROP TABLE files; --"}
	}
	out := make([]string, 0, len(vals)+2)
	for _, v := range vals {
		out = append(out, name+"="+url.QueryEscape(v))
	}
	out = append(out, name+"=%zz", name+"=a&"+name+"=b")
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// sortedKeys are m's keys, sorted.
func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
