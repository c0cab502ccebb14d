package facade

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/internal/ops"
)

func TestParseUpload(t *testing.T) {
	content := []byte("hello, workspace\n\x00\xff binary too")
	b64 := base64.StdEncoding.EncodeToString(content)
	cases := []struct {
		name, body string
		want       error
	}{
		{"plain", `{"filename":"a.txt","contentBase64":"` + b64 + `"}`, nil},
		{"reversed order and extras", `{"contentBase64":"` + b64 + `", "meta":{"x":[1,2,{"y":null}]}, "n":1.5e3, "ok":true, "filename":"a.txt"}`, nil},
		{"escaped slash", `{"filename":"a.txt","contentBase64":"` + strings.ReplaceAll(b64, "/", `\/`) + `"}`, nil},
		{"no filename", `{"contentBase64":"` + b64 + `"}`, errUploadFilename},
		{"filename not a string", `{"filename":5,"contentBase64":"` + b64 + `"}`, errUploadFilename},
		{"no content", `{"filename":"a.txt"}`, errUploadContent},
		{"data URL", `{"filename":"a.txt","contentBase64":"data:text/plain;base64,` + b64 + `"}`, errUploadContent},
		{"not base64", `{"filename":"a.txt","contentBase64":"!!!!"}`, errUploadContent},
		{"bad padding", `{"filename":"a.txt","contentBase64":"aGVsbG8"}`, errUploadContent},
		{"non-strict padding bits", `{"filename":"a.txt","contentBase64":"aGVsbG9="}`, errUploadContent},
		{"unicode escape in content", `{"filename":"a.txt","contentBase64":"\u0041AAA"}`, errUploadContent},
		{"duplicate key", `{"filename":"a","filename":"b","contentBase64":""}`, errUploadJSON},
		{"truncated", `{"filename":"a.txt","contentBase64":"` + b64[:8], errUploadJSON},
		{"trailing data", `{"filename":"a.txt","contentBase64":""} {}`, errUploadJSON},
		{"array", `[1]`, errUploadJSON},
		{"empty", ``, errUploadJSON},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			name, n, err := parseUpload(strings.NewReader(c.body), &out, 1<<20)
			if c.want != nil {
				if !errors.Is(err, c.want) {
					t.Fatalf("err = %v, want %v", err, c.want)
				}
				return
			}
			if err != nil || name != "a.txt" || n != int64(len(content)) || !bytes.Equal(out.Bytes(), content) {
				t.Fatalf("got %q %d %q %v", name, n, out.Bytes(), err)
			}
		})
	}
}

func TestCleanUploadPath(t *testing.T) {
	for in, want := range map[string]string{
		"a.txt": "a.txt", "dir/b.txt": "dir/b.txt", "./c": "c", "a/../b": "b",
		"": "", "..": "", "../x": "", "a/../../x": "", "/etc/passwd": "", "a\\b": "", ".": "", "x\x00y": "",
	} {
		if got := ops.CleanUploadPath(in); got != want {
			t.Errorf("cleanUploadPath(%q) = %q, want %q", in, got, want)
		}
	}
}

// hugeUpload streams a JSON upload whose base64 content never ends within size bytes.
type hugeUpload struct {
	head []byte
	left int64
}

func (h *hugeUpload) Read(b []byte) (int, error) {
	if len(h.head) > 0 {
		n := copy(b, h.head)
		h.head = h.head[n:]
		return n, nil
	}
	if h.left <= 0 {
		return 0, io.EOF
	}
	n := min(int64(len(b)), h.left)
	for i := range n {
		b[i] = 'A'
	}
	h.left -= n
	return int(n), nil
}

func TestAGibibyteUploadIsRefusedWithoutBufferingIt(t *testing.T) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	body := &hugeUpload{head: []byte(`{"filename":"big.bin","contentBase64":"`), left: 1 << 30}
	_, n, err := parseUpload(body, io.Discard, 25<<20)
	if !errors.Is(err, errUploadTooLarge) {
		t.Fatalf("err = %v after %d bytes, want errUploadTooLarge", err, n)
	}
	runtime.ReadMemStats(&after)
	if grown := int64(after.TotalAlloc - before.TotalAlloc); grown > 4<<20 {
		t.Fatalf("parsing allocated %d bytes; it must stream", grown)
	}
	if body.left < (1<<30)-(40<<20) {
		t.Fatalf("read %d bytes past the limit before refusing", (1<<30)-body.left)
	}
}

func FuzzParseUpload(f *testing.F) {
	for _, seed := range []string{
		`{"filename":"a","contentBase64":"aGk="}`, `{"contentBase64":"","filename":"x","z":[{"a":{}}]}`,
		`{"filename":"a","contentBase64":"data:,"}`, `{`, `{"a":`, `{"filename":"\ud800","contentBase64":"===="}`,
		`{"filename":"a","contentBase64":"aGk=\n"}`, `[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var out bytes.Buffer
		_, n, err := parseUpload(bytes.NewReader(body), &out, 1<<16)
		if err == nil && int64(out.Len()) != n {
			t.Fatalf("reported %d bytes, wrote %d", n, out.Len())
		}
		if out.Len() > 1<<16 {
			t.Fatalf("wrote %d bytes past the limit", out.Len())
		}
	})
}
