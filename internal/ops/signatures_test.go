package ops

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

var (
	goodAddress   = "0x19E7E376E7C213B7E7e7e46cc70A5dD086DAff2A"
	goodSignature = "0x" + strings.Repeat("ab", 65)
)

// TestSignatureRules: each malformed signature body gets the contract's own message.
func TestSignatureRules(t *testing.T) {
	for _, tc := range []struct {
		name string
		sig  Signature
		want string
	}{
		{"well-formed", Signature{Signature: goodSignature, Address: goodAddress}, ""},
		{"no signature", Signature{Address: goodAddress}, MsgSignatureFields},
		{"no address", Signature{Signature: goodSignature}, MsgSignatureFields},
		{"short address", Signature{Signature: goodSignature, Address: "0x1234"}, MsgAddressFormat},
		{"bad checksum", Signature{Signature: goodSignature, Address: strings.Replace(goodAddress, "E7", "e7", 1)}, MsgAddressChecksum},
		{"short signature", Signature{Signature: "0xabcd", Address: goodAddress}, MsgSignatureFormat},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.sig.validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused a well-formed signature: %v", err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || e.Code != Invalid || e.Message != tc.want {
				t.Fatalf("got %v, want Invalid %q", err, tc.want)
			}
		})
	}
}

// FuzzSignatureRules: whatever a client sends, the rules answer nil or an Invalid *Error,
// never a panic and never a failure of the platform.
func FuzzSignatureRules(f *testing.F) {
	for _, seed := range []string{
		`{"signature":"` + goodSignature + `","address":"` + goodAddress + `"}`,
		`{"signature":1}`, `{}`, `{"address":"0x` + strings.Repeat("0", 40) + `"}`,
		`{"signature":"0x","address":"0x"}`, `{"signature":"` + strings.Repeat("é", 70) + `"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var sig Signature
		if json.Unmarshal(body, &sig) != nil {
			return
		}
		err := sig.validate()
		if err == nil {
			if sig.Signature == "" || sig.Address == "" {
				t.Fatalf("accepted a signature without both fields: %q", body)
			}
			return
		}
		var e *Error
		if !errors.As(err, &e) || e.Code != Invalid {
			t.Fatalf("body %q: got %v, want an Invalid *Error", body, err)
		}
	})
}
