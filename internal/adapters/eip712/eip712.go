// Package eip712 verifies the wallet signatures agentplane attaches to files: EIP-712 typed
// data with the domain {name: "Sign Content", version: "1.0.0", chainId: 1} and the primary
// type Sign {address: address, cid: string, date: string}, the format of the hosted v3 API.
package eip712

import (
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/math"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/signer/core/apitypes"
)

// Errors of address and signature checks.
var (
	ErrAddressFormat   = errors.New("address must be 0x followed by 40 hex digits")
	ErrAddressChecksum = errors.New("address has a wrong EIP-55 checksum")
	ErrSignatureFormat = errors.New("signature must be 0x followed by 130 hex digits")
	ErrMismatch        = errors.New("signature was not made by address")
)

var (
	addressRe   = regexp.MustCompile(`^0x[0-9a-fA-F]{40}$`)
	signatureRe = regexp.MustCompile(`^0x[0-9a-fA-F]{130}$`)
)

// Domain of every signature.
var Domain = apitypes.TypedDataDomain{Name: "Sign Content", Version: "1.0.0", ChainId: math.NewHexOrDecimal256(1)}

// CheckAddress validates an address; mixed case must match its EIP-55 checksum.
func CheckAddress(addr string) error {
	if !addressRe.MatchString(addr) {
		return ErrAddressFormat
	}
	body := addr[2:]
	if body != strings.ToLower(body) && body != strings.ToUpper(body) &&
		common.HexToAddress(addr).Hex() != addr {
		return ErrAddressChecksum
	}
	return nil
}

// CheckSignature validates a signature's shape (65 bytes, hex).
func CheckSignature(sig string) error {
	if !signatureRe.MatchString(sig) {
		return ErrSignatureFormat
	}
	return nil
}

// Hash is the EIP-712 digest a wallet signs for (address, cid, date).
func Hash(address, cid, date string) ([]byte, error) {
	td := apitypes.TypedData{
		Types: apitypes.Types{
			"EIP712Domain": {
				{Name: "name", Type: "string"}, {Name: "version", Type: "string"}, {Name: "chainId", Type: "uint256"},
			},
			"Sign": {
				{Name: "address", Type: "address"}, {Name: "cid", Type: "string"}, {Name: "date", Type: "string"},
			},
		},
		PrimaryType: "Sign",
		Domain:      Domain,
		Message:     apitypes.TypedDataMessage{"address": address, "cid": cid, "date": date},
	}
	hash, _, err := apitypes.TypedDataAndHash(td)
	if err != nil {
		return nil, fmt.Errorf("typed data: %w", err)
	}
	return hash, nil
}

// Recover returns the address that made sig over (address, cid, date).
func Recover(address, cid, date, sig string) (common.Address, error) {
	if err := CheckAddress(address); err != nil {
		return common.Address{}, err
	}
	if err := CheckSignature(sig); err != nil {
		return common.Address{}, err
	}
	raw, err := hex.DecodeString(sig[2:])
	if err != nil {
		return common.Address{}, ErrSignatureFormat
	}
	// Wallets give v as 27/28; the recovery routine wants 0/1.
	if raw[64] >= 27 {
		raw[64] -= 27
	}
	if raw[64] > 1 {
		return common.Address{}, ErrSignatureFormat
	}
	hash, err := Hash(address, cid, date)
	if err != nil {
		return common.Address{}, err
	}
	pub, err := crypto.SigToPub(hash, raw)
	if err != nil {
		return common.Address{}, fmt.Errorf("%w: %v", ErrMismatch, err)
	}
	return crypto.PubkeyToAddress(*pub), nil
}

// Verify checks that sig is address's signature over (address, cid, date).
func Verify(address, cid, date, sig string) error {
	got, err := Recover(address, cid, date, sig)
	if err != nil {
		return err
	}
	if !strings.EqualFold(got.Hex(), address) {
		return ErrMismatch
	}
	return nil
}
