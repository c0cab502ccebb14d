package ops

import (
	"crypto/rand"
	"encoding/base32"
)

// idEncoding spells random ids: lower case letters and digits, valid in object names.
var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// newID returns prefix and n random bytes, spelled with idEncoding.
func newID(prefix string, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return prefix + idEncoding.EncodeToString(b)
}
