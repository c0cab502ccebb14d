package secrets

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type staticKey []byte

func (k staticKey) Key(context.Context) ([]byte, error) {
	if k == nil {
		return nil, ErrNotConfigured
	}
	return k, nil
}

func TestSealOpenRoundTripAndBinding(t *testing.T) {
	ctx := context.Background()
	s := &Sealer{Keys: staticKey(bytes.Repeat([]byte{7}, 32))}
	v, err := s.Seal(ctx, "ws", "sec-a", []byte("sk-live-123"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(v.Ciphertext, "sk-live") {
		t.Fatal("ciphertext shows the plaintext")
	}
	got, err := s.Open(ctx, "ws", "sec-a", v)
	if err != nil || string(got) != "sk-live-123" {
		t.Fatalf("Open = %q, %v", got, err)
	}
	if _, err := s.Open(ctx, "ws", "sec-b", v); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("a value moved to another secret must not open: %v", err)
	}
	other := &Sealer{Keys: staticKey(bytes.Repeat([]byte{8}, 32))}
	if _, err := other.Open(ctx, "ws", "sec-a", v); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("another key must not open it: %v", err)
	}
	v2, _ := s.Seal(ctx, "ws", "sec-a", []byte("sk-live-123"))
	if v2.Ciphertext == v.Ciphertext {
		t.Fatal("two seals of one value must differ (random nonce)")
	}
	tampered := *v
	tampered.Ciphertext = v.Ciphertext[:len(v.Ciphertext)-4] + "AAAA"
	if _, err := s.Open(ctx, "ws", "sec-a", &tampered); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("tampered ciphertext: %v", err)
	}
}

func TestNoKeyIsNotConfigured(t *testing.T) {
	s := &Sealer{Keys: staticKey(nil)}
	if _, err := s.Seal(context.Background(), "ws", "x", []byte("v")); !errors.Is(err, ErrNotConfigured) {
		t.Fatalf("got %v", err)
	}
}

func TestFileKeySourceFormats(t *testing.T) {
	key := bytes.Repeat([]byte{0xab}, 32)
	dir := t.TempDir()
	for name, content := range map[string][]byte{"raw": key, "hex": []byte(hex.EncodeToString(key) + "\n")} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, content, 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := FileKeySource{Path: p}.Key(context.Background())
		if err != nil || !bytes.Equal(got, key) {
			t.Errorf("%s: %x %v", name, got, err)
		}
	}
	if _, err := (FileKeySource{Path: filepath.Join(dir, "missing")}).Key(context.Background()); !errors.Is(err, ErrNotConfigured) {
		t.Errorf("missing file: %v", err)
	}
}
