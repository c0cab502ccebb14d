package facade

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Errors of the streaming upload parser.
var (
	errUploadJSON     = errors.New("body is not the expected JSON object")
	errUploadFilename = errors.New("filename is missing or not a string")
	errUploadContent  = errors.New("contentBase64 is missing, not strict base64 or a data URL")
	errUploadTooLarge = errors.New("file too large")
)

const (
	maxUploadKey      = 256
	maxUploadFilename = 4096
	maxSkipDepth      = 32
)

// parseUpload reads {"filename": "...", "contentBase64": "..."} from r without holding the
// content in memory: the base64 string is decoded as it streams into w, and parsing stops
// with errUploadTooLarge as soon as more than limit bytes have been decoded. Other fields
// are skipped.
func parseUpload(r io.Reader, w io.Writer, limit int64) (filename string, size int64, err error) {
	p := &uploadParser{br: bufio.NewReaderSize(r, 32<<10)}
	if err := p.expect('{'); err != nil {
		return "", 0, err
	}
	seen := map[string]bool{}
	gotName, gotContent := false, false
	for first := true; ; first = false {
		c, err := p.next()
		if err != nil {
			return "", 0, err
		}
		if c == '}' && first {
			break
		}
		if !first {
			if c == '}' {
				break
			}
			if c != ',' {
				return "", 0, errUploadJSON
			}
			if c, err = p.next(); err != nil {
				return "", 0, err
			}
		}
		if c != '"' {
			return "", 0, errUploadJSON
		}
		key, err := p.smallString(maxUploadKey)
		if err != nil {
			return "", 0, err
		}
		if seen[key] {
			return "", 0, errUploadJSON
		}
		seen[key] = true
		if err := p.expect(':'); err != nil {
			return "", 0, err
		}
		switch key {
		case "filename":
			if c, err := p.next(); err != nil || c != '"' {
				return "", 0, errUploadFilename
			}
			if filename, err = p.smallString(maxUploadFilename); err != nil {
				return "", 0, errUploadFilename
			}
			gotName = true
		case "contentBase64":
			if c, err := p.next(); err != nil || c != '"' {
				return "", 0, errUploadContent
			}
			if size, err = p.base64String(w, limit); err != nil {
				return "", 0, err
			}
			gotContent = true
		default:
			if err := p.skipValue(0); err != nil {
				return "", 0, err
			}
		}
	}
	if c, err := p.next(); !errors.Is(err, io.EOF) {
		_ = c
		return "", 0, errUploadJSON
	}
	switch {
	case !gotName:
		return "", 0, errUploadFilename
	case !gotContent:
		return "", 0, errUploadContent
	}
	return filename, size, nil
}

type uploadParser struct{ br *bufio.Reader }

// next returns the next non-space byte (io.EOF at the end).
func (p *uploadParser) next() (byte, error) {
	for {
		c, err := p.br.ReadByte()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return 0, io.EOF
			}
			return 0, err
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return c, nil
	}
}

func (p *uploadParser) expect(want byte) error {
	c, err := p.next()
	if err != nil {
		return unexpectedEOF(err)
	}
	if c != want {
		return errUploadJSON
	}
	return nil
}

func unexpectedEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return errUploadJSON
	}
	return err
}

// smallString reads the rest of a JSON string (after its opening quote) of at most max raw
// bytes and decodes it with encoding/json.
func (p *uploadParser) smallString(max int) (string, error) {
	raw := []byte{'"'}
	for escaped := false; ; {
		c, err := p.br.ReadByte()
		if err != nil {
			return "", unexpectedEOF(err)
		}
		raw = append(raw, c)
		if len(raw) > max+2 {
			return "", errUploadJSON
		}
		switch {
		case escaped:
			escaped = false
		case c == '\\':
			escaped = true
		case c == '"':
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return "", errUploadJSON
			}
			return s, nil
		case c < 0x20:
			return "", errUploadJSON
		}
	}
}

// base64String streams the rest of a JSON string (after its opening quote) through a strict
// base64 decoder into w.
func (p *uploadParser) base64String(w io.Writer, limit int64) (int64, error) {
	src := &jsonStringReader{br: p.br}
	head, err := src.br.Peek(5)
	if err == nil && string(head) == "data:" {
		return 0, errUploadContent
	}
	dec := base64.NewDecoder(base64.StdEncoding.Strict(), src)
	n, err := io.Copy(&limitedWriter{w: w, left: limit}, dec)
	switch {
	case errors.Is(err, errUploadTooLarge):
		return n, errUploadTooLarge
	case src.err != nil:
		return n, src.err
	case err != nil:
		var corrupt base64.CorruptInputError
		if errors.As(err, &corrupt) || errors.Is(err, io.ErrUnexpectedEOF) {
			return n, errUploadContent
		}
		return n, err
	}
	if !src.done {
		return n, errUploadContent
	}
	return n, nil
}

// jsonStringReader yields the characters of a JSON string up to its closing quote. Base64
// needs no escapes but `\/`; any other escape is refused.
type jsonStringReader struct {
	br   *bufio.Reader
	done bool
	err  error
}

func (j *jsonStringReader) Read(b []byte) (int, error) {
	n := 0
	for n < len(b) && !j.done {
		c, err := j.br.ReadByte()
		if err != nil {
			j.err = unexpectedEOF(err)
			return n, j.err
		}
		switch {
		case c == '"':
			j.done = true
		case c == '\\':
			e, err := j.br.ReadByte()
			if err != nil || e != '/' {
				j.err = errUploadContent
				return n, j.err
			}
			b[n] = '/'
			n++
		case c < 0x20:
			j.err = errUploadContent
			return n, j.err
		default:
			b[n] = c
			n++
		}
	}
	if j.done && n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

// limitedWriter fails once more than left bytes are written.
type limitedWriter struct {
	w    io.Writer
	left int64
}

func (l *limitedWriter) Write(b []byte) (int, error) {
	if int64(len(b)) > l.left {
		return 0, errUploadTooLarge
	}
	l.left -= int64(len(b))
	return l.w.Write(b)
}

// skipValue skips one JSON value of another field.
func (p *uploadParser) skipValue(depth int) error {
	if depth > maxSkipDepth {
		return errUploadJSON
	}
	c, err := p.next()
	if err != nil {
		return unexpectedEOF(err)
	}
	switch c {
	case '"':
		_, err := p.smallString(1 << 16)
		return err
	case '{', '[':
		closing := byte('}')
		if c == '[' {
			closing = ']'
		}
		for first := true; ; first = false {
			c, err := p.next()
			if err != nil {
				return unexpectedEOF(err)
			}
			if c == closing {
				return nil
			}
			if !first {
				if c != ',' {
					return errUploadJSON
				}
			} else {
				_ = p.br.UnreadByte()
			}
			if closing == '}' {
				if err := p.expect('"'); err != nil {
					return err
				}
				if _, err := p.smallString(maxUploadKey); err != nil {
					return err
				}
				if err := p.expect(':'); err != nil {
					return err
				}
			}
			if err := p.skipValue(depth + 1); err != nil {
				return err
			}
		}
	default:
		// A number or literal: read it up to a delimiter, then let encoding/json judge it.
		lit := []byte{c}
		for {
			b, err := p.br.ReadByte()
			if err != nil {
				break
			}
			if b == ',' || b == '}' || b == ']' || b == ' ' || b == '\n' || b == '\t' || b == '\r' {
				_ = p.br.UnreadByte()
				break
			}
			lit = append(lit, b)
			if len(lit) > 64 {
				return errUploadJSON
			}
		}
		var v any
		if err := json.Unmarshal(lit, &v); err != nil {
			return fmt.Errorf("%w: %v", errUploadJSON, err)
		}
	}
	return nil
}
