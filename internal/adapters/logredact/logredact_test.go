package logredact

import (
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"
)

// A long value (whose hex form the opaque pattern would catch anyway) and a short one.
func TestRedactForms(t *testing.T) {
	for _, secret := range []string{"sk-live-Value/With+Odd?Bytes~1", "pa55w0rd!"} {
		t.Run(secret, func(t *testing.T) { testRedactForms(t, secret) })
	}
}

func testRedactForms(t *testing.T, secret string) {
	b64 := func(enc *base64.Encoding, prefix, suffix string) string {
		return enc.EncodeToString([]byte(prefix + secret + suffix))
	}
	for _, tc := range []struct{ name, in string }{
		{"verbatim", "the key is " + secret + " today"},
		{"hex lower", "dump " + hex.EncodeToString([]byte(secret)) + " end"},
		{"hex upper", "DUMP " + strings.ToUpper(hex.EncodeToString([]byte(secret))) + " END"},
		{"base64 std", "b64 " + base64.StdEncoding.EncodeToString([]byte(secret)) + " end"},
		{"base64 url", "b64 " + base64.URLEncoding.EncodeToString([]byte(secret)) + " end"},
		{"base64 raw url", "b64 " + base64.RawURLEncoding.EncodeToString([]byte(secret)) + " end"},
		{"base64 std inside, aligned", "basic " + b64(base64.StdEncoding, "", ":x")},
		{"base64 std inside, offset 1", "basic " + b64(base64.StdEncoding, "u:", "")},
		{"base64 std inside, offset 2", "basic " + b64(base64.StdEncoding, "us:", "!")},
		{"base64 url inside, offset 1", "jwt " + b64(base64.RawURLEncoding, `{"k":"`, `"}`)},
		{"base64 url inside, offset 2", "jwt " + b64(base64.RawURLEncoding, `{"ke":"`, `"}`)},
		{"base64 url inside, aligned", "jwt " + b64(base64.RawURLEncoding, `{"key":"`, `"}`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := New([]string{secret}).Redact(tc.in)
			if !strings.Contains(out, Marker) || strings.Contains(out, secret) {
				t.Fatalf("Redact(%q) = %q", tc.in, out)
			}
			// What remains of the encoded text reveals at most a few bits at either end.
			for _, f := range forms(secret)[1:] {
				if len(f) > 12 && strings.Contains(out, f[2:len(f)-2]) {
					t.Fatalf("Redact(%q) = %q still holds the form %q", tc.in, out, f)
				}
			}
		})
	}
}

func TestRedactKeepsShortValuesAndLines(t *testing.T) {
	r := New([]string{"abc", "12345", ""})
	if got := r.Redact("abc 12345 abcdef"); got != "abc 12345 abcdef" {
		t.Errorf("short values hidden: %q", got)
	}
	pem := "-----BEGIN KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END KEY-----"
	in := []string{"key:", "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC", "-----BEGIN KEY-----", "x"}
	out := New([]string{pem}).RedactLines(in)
	if len(out) != len(in) || out[1] != Marker || out[2] != Marker || out[3] != "x" {
		t.Errorf("multi-line value: %q", out)
	}
	// A value across two lines is hidden on both, and the lines stay lines.
	out = New([]string{"hunter2hunter2"}).RedactLines([]string{"a hunter2", "hunter2 b"})
	if len(out) != 2 || out[0] != "a "+Marker || out[1] != Marker+" b" {
		t.Errorf("split value: %q", out)
	}
}

func TestFollowerSplitAcrossWrites(t *testing.T) {
	f := NewFollower(New([]string{"correct-horse-battery"}))
	var got []string
	got = append(got, f.Write("first line")...)
	got = append(got, f.Write("the value is correct-horse")...) // the runtime split the line here
	got = append(got, f.Write("-battery and more")...)
	got = append(got, f.Write("a line long enough to let the others out")...)
	got = append(got, f.Flush()...)
	want := []string{"first line", "the value is " + Marker, Marker + " and more", "a line long enough to let the others out"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got %q, want %q", got, want)
	}
	if f.Pending() != 0 {
		t.Fatal("Flush left lines")
	}
}

func TestFollowerValueContinuesAfterWhatWentOut(t *testing.T) {
	f := NewFollower(New([]string{"0123456789-secret"}))
	out := f.Write("x 0123456789-s")
	out = append(out, f.Flush()...) // the stream paused: the line went out, redacted as far as known
	out = append(out, f.Write("ecret y", strings.Repeat("z", 20))...)
	out = append(out, f.Flush()...)
	if strings.Contains(strings.Join(out, "\n"), "ecret y") {
		t.Fatalf("the rest of a value that began in a line already out was shown: %q", out)
	}
}

func TestFollowerSecretAttachedMidStream(t *testing.T) {
	f := NewFollower(New(nil))
	out := f.Write("nothing to hide")
	f.SetRedactor(New([]string{"attached-later-value"}))
	out = append(out, f.Write("now attached-later-value shows")...)
	out = append(out, f.Flush()...)
	if strings.Join(out, "\n") != "nothing to hide\nnow "+Marker+" shows" {
		t.Fatalf("got %q", out)
	}
}

func TestRedactValuesLeavesLookalikes(t *testing.T) {
	sha := "3b18e512dba79e4c8300dd08aeb37f8e728b8dad"
	got := New([]string{"my-secret-value"}).RedactValues("commit " + sha + " has my-secret-value")
	if got != "commit "+sha+" has "+Marker {
		t.Fatalf("got %q", got)
	}
}

func TestRedactValuesCut(t *testing.T) {
	r := New([]string{"0123456789abcdef-value"})
	for in, want := range map[string]string{
		"out: 0123456789ab":            "out: " + Marker,
		"out: 01234":                   "out: 01234", // too little of it to tell
		"out: 0123456789abcdef-value!": "out: " + Marker + "!",
		"nothing here":                 "nothing here",
	} {
		if got := r.RedactValuesCut(in); got != want {
			t.Errorf("RedactValuesCut(%q) = %q, want %q", in, got, want)
		}
	}
}

// A follower of an agent with 20 attached secrets of 40 bytes, fed 100-byte lines one at a time.
func BenchmarkFollowerLine(b *testing.B) {
	var vals []string
	for i := range 20 {
		vals = append(vals, strings.Repeat(string(rune('a'+i)), 36)+"-key")
	}
	f := NewFollower(New(vals))
	line := strings.Repeat("gateway says something unremarkable ", 3)[:100]
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		f.Write(line)
	}
}

// The same line through a Redactor alone (what a follower did before it held lines back).
func BenchmarkRedactLine(b *testing.B) {
	var vals []string
	for i := range 20 {
		vals = append(vals, strings.Repeat(string(rune('a'+i)), 36)+"-key")
	}
	r := New(vals)
	line := strings.Repeat("gateway says something unremarkable ", 3)[:100]
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		r.Redact(line)
	}
}
