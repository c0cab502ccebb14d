package hostile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"mime/multipart"
	"strings"
)

// payload is a request body: bytes, or (huge bodies) a prefix, size filler bytes and a suffix
// made on the fly.
type payload struct {
	data           []byte
	prefix, suffix []byte
	filler         int64
}

func (p payload) size() int64 { return int64(len(p.data)+len(p.prefix)+len(p.suffix)) + p.filler }

func (p payload) reader() io.Reader {
	if p.filler == 0 {
		return bytes.NewReader(p.data)
	}
	return io.MultiReader(bytes.NewReader(p.prefix), io.LimitReader(repeatByte('a'), p.filler), bytes.NewReader(p.suffix))
}

// repeatByte reads an endless run of one byte.
type repeatByte byte

func (r repeatByte) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

// body is one hostile body and the Content-Type it is sent with.
type body struct {
	what        string
	payload     payload
	contentType string
}

const jsonType = "application/json"

// sampleBody is a well-typed JSON body of op (empty for operations without one).
func sampleBody(op operation) []byte {
	if op.Schema == nil {
		return nil
	}
	raw, _ := json.Marshal(sample(op.Schema, 0))
	return raw
}

// jsonBodies are the hostile JSON bodies for op, as (required, optional): one of each kind is
// required (every field's wrong type among them); the rest fill the budget.
func jsonBodies(op operation, rng *rand.Rand) (required, optional []body) {
	js := func(what, s string) body {
		return body{what: what, payload: payload{data: []byte(s)}, contentType: jsonType}
	}
	base := sampleBody(op)
	if base == nil {
		base = []byte(`{"hostile":"x","n":1}`)
	}
	malformed := []string{`{`, `{"a":}`, `{'a':1}`, `{"a":1,}`, `nul`, `{"a":"\x`, `{"a":1}}`, `]`,
		"\xef\xbb\xbf{}", `{"a":1} {"b":2}`, `{"a":"\ud800"}`, `{"a":01}`, `{"a":NaN}`, "{\"a\":\"\x00\"}", `{"a" 1}`}
	pick := func(list []string) string { return list[rng.IntN(len(list))] }
	cut := 1 + rng.IntN(max(1, len(base)-1))
	required = append(required,
		js("empty body", ""),
		js("malformed JSON", pick(malformed)),
		js("truncated JSON", string(base[:min(cut, len(base))])),
		js("top-level wrong type", pick([]string{`[]`, `"x"`, `1`, `null`, `true`, `[{}]`})),
		js("random bytes", string(randBytes(rng, 1+rng.IntN(4096)))),
		hugeBody(op),
	)
	for _, f := range fields(op.Schema, nil) {
		wrong := wrongValues(schemaType(f.schema))
		w := wrong[rng.IntN(len(wrong))]
		required = append(required, js(fmt.Sprintf("field %s = %s", strings.Join(f.path, "."), w), setField(base, f.path, w)))
	}
	for _, m := range malformed {
		optional = append(optional, js("malformed JSON", m))
	}
	optional = append(optional,
		js("deeply nested array", strings.Repeat("[", 100000)),
		js("deeply nested object", strings.Repeat(`{"a":`, 20000)+"1"+strings.Repeat("}", 20000)),
		js("duplicate keys", `{"name":"a","name":1,"name":null}`),
		js("invalid UTF-8 strings", replaceStrings(base, "\xff\xfe\xfd")),
		js("64 KiB strings", replaceStrings(base, strings.Repeat("é", 32<<10))),
		js("control-character strings", replaceStrings(base, "\\u0000\\u001b[31m\\r\\n")),
		js("unknown fields", mergeRaw(base, `"__proto__":{"admin":true},"constructor":{"prototype":1}`)),
		js("random bytes", string(randBytes(rng, 1+rng.IntN(64<<10)))),
		js("sample body", string(base)),
	)
	for _, f := range fields(op.Schema, nil) {
		for _, w := range wrongValues(schemaType(f.schema)) {
			optional = append(optional, js(fmt.Sprintf("field %s = %s", strings.Join(f.path, "."), w), setField(base, f.path, w)))
		}
	}
	return required, optional
}

// hugeBody is a JSON-looking body just over the route's limit.
func hugeBody(op operation) body {
	p := payload{prefix: []byte(`{"name":"`), suffix: []byte(`"}`), filler: op.bodyLimit() + 64<<10}
	ct := jsonType
	if op.Multipart {
		p.prefix = []byte("--hostile\r\nContent-Disposition: form-data; name=\"file\"; filename=\"big\"\r\n\r\n")
		p.suffix = []byte("\r\n--hostile--\r\n")
		ct = "multipart/form-data; boundary=hostile"
	}
	return body{what: fmt.Sprintf("huge body (%d MiB, over the limit)", p.size()>>20), payload: p, contentType: ct}
}

// multipartBodies are the hostile bodies of POST /v3/files.
func multipartBodies(op operation, rng *rand.Rand) (required, optional []body) {
	form := func(what string, parts ...[3]string) body {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		_ = mw.SetBoundary("hostile")
		for _, p := range parts {
			if p[0] == "file" && p[1] != "" {
				w, _ := mw.CreateFormFile("file", p[1])
				_, _ = w.Write([]byte(p[2]))
			} else {
				_ = mw.WriteField(p[0], p[2])
			}
		}
		_ = mw.Close()
		return body{what: what, payload: payload{data: buf.Bytes()}, contentType: mw.FormDataContentType()}
	}
	file := [3]string{"file", "a.txt", "hostile"}
	mp := "multipart/form-data; boundary=hostile"
	valid := form("", file).payload.data
	bigKV, _ := json.Marshal(map[string]string{"k": strings.Repeat("v", 3<<20)})
	required = append(required,
		body{what: "empty body", contentType: mp},
		body{what: "malformed multipart", payload: payload{data: []byte("--hostile\r\njunk\r\n\r\n--hostile")}, contentType: mp},
		body{what: "truncated multipart", payload: payload{data: valid[:1+rng.IntN(len(valid)-1)]}, contentType: mp},
		body{what: "random bytes", payload: payload{data: randBytes(rng, 1+rng.IntN(4096))}, contentType: mp},
		body{what: "no boundary", payload: payload{data: valid}, contentType: "multipart/form-data"},
		form("no file part", [3]string{"network", "", "public"}),
		form("network of the wrong type", file, [3]string{"network", "", "123"}),
		form("keyvalues of the wrong type", file, [3]string{"keyvalues", "", `{"a":1}`}),
		hugeBody(op),
		form("3 MiB keyvalues", file, [3]string{"keyvalues", "", string(bigKV)}),
		form("file as a plain field", [3]string{"file", "", "not a file part"}),
	)
	optional = append(optional,
		form("keyvalues not JSON", file, [3]string{"keyvalues", "", "{"}),
		form("keyvalues array", file, [3]string{"keyvalues", "", "[1,2]"}),
		form("unknown network", file, [3]string{"network", "", "ипфс"}),
		form("traversal filename", [3]string{"file", "../../../etc/passwd", "x"}),
		form("two files", file, [3]string{"file", "b.txt", "second"}),
		form("long name", file, [3]string{"name", "", strings.Repeat("n", 1<<20)}),
		form("empty file", [3]string{"file", "empty.txt", ""}),
		body{what: "JSON body", payload: payload{data: []byte(`{"file":"x"}`)}, contentType: jsonType},
		body{what: "bad part header", payload: payload{data: []byte("--hostile\r\nContent-Disposition: form-data; name=\"file\"; filename*=UTF-8''%ff%fe\r\nContent-Type: \x01\r\n\r\nx\r\n--hostile--\r\n")}, contentType: mp},
	)
	return required, optional
}

// setField returns base with the property at path (created as needed) set to raw JSON.
func setField(base []byte, path []string, raw string) string {
	var m map[string]any
	if json.Unmarshal(base, &m) != nil {
		m = map[string]any{}
	}
	cur := m
	for _, k := range path[:len(path)-1] {
		next, ok := cur[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			cur[k] = next
		}
		cur = next
	}
	cur[path[len(path)-1]] = json.RawMessage(raw)
	out, err := json.Marshal(m)
	if err != nil { // raw is not valid JSON (1e400 is): splice it in by hand
		cur[path[len(path)-1]] = "\x00hostile\x00"
		out, _ = json.Marshal(m)
		return strings.Replace(string(out), `"\u0000hostile\u0000"`, raw, 1)
	}
	return string(out)
}

// replaceStrings returns base with every string value replaced by s (inserted verbatim, so
// invalid UTF-8 and escapes reach the server as they are).
func replaceStrings(base []byte, s string) string {
	var v any
	if json.Unmarshal(base, &v) != nil {
		return `{"a":"` + s + `"}`
	}
	var walk func(any) any
	walk = func(v any) any {
		switch t := v.(type) {
		case map[string]any:
			for k, x := range t {
				t[k] = walk(x)
			}
		case []any:
			for i, x := range t {
				t[i] = walk(x)
			}
		case string:
			return "\x00hostile\x00"
		}
		return v
	}
	out, _ := json.Marshal(walk(v))
	return strings.ReplaceAll(string(out), `"\u0000hostile\u0000"`, `"`+s+`"`)
}

// mergeRaw adds raw members to a JSON object body.
func mergeRaw(base []byte, members string) string {
	s := strings.TrimSpace(string(base))
	if s == "{}" || !strings.HasPrefix(s, "{") {
		return "{" + members + "}"
	}
	return "{" + members + "," + s[1:]
}

// randBytes are n random bytes.
func randBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// randString is n random characters of alphabet.
func randString(rng *rand.Rand, n int, alphabet string) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[rng.IntN(len(alphabet))]
	}
	return string(b)
}
