package eip712

import (
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/crypto"
)

// Vector computed with ethers v6 (Wallet.signTypedData) for private key 0x11…11.
const (
	vecAddress = "0x19E7E376E7C213B7E7e7e46cc70A5dD086DAff2A"
	vecCID     = "bafkreih5aznjvttude6c3wbvqeebb6rlx5wkbzyppv7garjiubll2ceym4"
	vecDate    = "2024-07-29T18:29:47.355Z"
	vecDigest  = "ff61df256cef94a1f280c2979a16f4430fae6b840d6fea45389fffd5349c7b01"
	vecSig     = "0x220adddc1ff1d246449bbd65f8966cf340cb7742c9770ca46b57de8d40c669595b0dac6ca114766501fb7dd5463b56bba4e7ab65a3cfe413b6a0f0d8282b28a11b"
)

func TestDigestMatchesEthers(t *testing.T) {
	h, err := Hash(vecAddress, vecCID, vecDate)
	if err != nil {
		t.Fatal(err)
	}
	if got := hex.EncodeToString(h); got != vecDigest {
		t.Fatalf("digest %s, want %s", got, vecDigest)
	}
}

func TestVerify(t *testing.T) {
	tampered := vecSig[:10] + "0" + vecSig[11:]
	if tampered == vecSig {
		tampered = vecSig[:10] + "1" + vecSig[11:]
	}
	cases := []struct {
		name                    string
		address, cid, date, sig string
		want                    error
	}{
		{"ethers signature", vecAddress, vecCID, vecDate, vecSig, nil},
		{"lower-case address", strings.ToLower(vecAddress), vecCID, vecDate, vecSig, nil},
		{"other date", vecAddress, vecCID, "2024-07-29T18:29:47.356Z", vecSig, ErrMismatch},
		{"other cid", vecAddress, vecCID[:len(vecCID)-1] + "a", vecDate, vecSig, ErrMismatch},
		{"other address", "0x" + strings.Repeat("1", 40), vecCID, vecDate, vecSig, ErrMismatch},
		{"tampered signature", vecAddress, vecCID, vecDate, tampered, ErrMismatch},
		{"bad checksum", "0x19e7E376E7C213B7E7e7e46cc70A5dD086DAff2A", vecCID, vecDate, vecSig, ErrAddressChecksum},
		{"short address", "0x1234", vecCID, vecDate, vecSig, ErrAddressFormat},
		{"short signature", vecAddress, vecCID, vecDate, vecSig[:100], ErrSignatureFormat},
		{"bad v", vecAddress, vecCID, vecDate, vecSig[:130] + "05", ErrSignatureFormat},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Verify(c.address, c.cid, c.date, c.sig)
			if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
				t.Fatalf("Verify = %v, want %v", err, c.want)
			}
		})
	}
}

func TestRoundTripWithGoEthereumSigner(t *testing.T) {
	key, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	addr := crypto.PubkeyToAddress(key.PublicKey).Hex()
	h, err := Hash(addr, vecCID, vecDate)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := crypto.Sign(h, key)
	if err != nil {
		t.Fatal(err)
	}
	sig[64] += 27
	if err := Verify(addr, vecCID, vecDate, "0x"+hex.EncodeToString(sig)); err != nil {
		t.Fatal(err)
	}
}
