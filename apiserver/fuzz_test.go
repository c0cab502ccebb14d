package apiserver

import (
	"errors"
	"testing"
)

// FuzzDecodeSignatureBody: whatever the body, the decoder answers a well-formed request or a
// 4xx *Error — never a panic, never a 5xx.
func FuzzDecodeSignatureBody(f *testing.F) {
	for _, seed := range []string{
		`{"signature":"0x` + repeat("ab", 65) + `","address":"0x19E7E376E7C213B7E7e7e46cc70A5dD086DAff2A"}`,
		`{"signature":1}`, `{}`, `[]`, `null`, `"x"`, ``, `{"address":"0x` + repeat("0", 40) + `"`,
		`{"signature":"0x","address":"0x"} {}`, "\x00\xff", `{"signature":"` + repeat("é", 70) + `"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeSignatureBody(body)
		if err == nil {
			if req.Signature == "" || req.Address == "" {
				t.Fatalf("accepted a body without both fields: %q", body)
			}
			return
		}
		var e *Error
		if !errors.As(err, &e) || e.Status < 400 || e.Status > 499 {
			t.Fatalf("body %q: got %v, want a 4xx *Error", body, err)
		}
	})
}

func repeat(s string, n int) string {
	out := ""
	for range n {
		out += s
	}
	return out
}
