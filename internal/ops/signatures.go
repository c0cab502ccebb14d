package ops

import (
	"context"
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/cid"
	"github.com/agentplane/agentplane/internal/adapters/eip712"
)

// Signature messages.
const (
	MsgSignatureFields   = "signature and address are required"
	MsgSignatureBody     = "Body must be a JSON object with signature and address"
	MsgAddressFormat     = "Invalid address: expected 0x followed by 40 hex digits"
	MsgAddressChecksum   = "Invalid address: EIP-55 checksum mismatch"
	MsgSignatureFormat   = "Invalid signature: expected 0x followed by 130 hex digits"
	MsgSignatureMismatch = "Signature does not match address"
	MsgAlreadySigned     = "File already has a signature"
	MsgSignatureNotFound = "Signature not found"
)

// Signature is a wallet's EIP-712 signature of a file and the wallet's address.
type Signature struct {
	Signature string
	Address   string
}

// validate checks both fields are present and well-formed.
func (s Signature) validate() error {
	if s.Signature == "" || s.Address == "" {
		return Fail(Invalid, MsgSignatureFields)
	}
	switch err := eip712.CheckAddress(s.Address); {
	case errors.Is(err, eip712.ErrAddressChecksum):
		return Fail(Invalid, MsgAddressChecksum)
	case err != nil:
		return Fail(Invalid, MsgAddressFormat)
	}
	if err := eip712.CheckSignature(s.Signature); err != nil {
		return Fail(Invalid, MsgSignatureFormat)
	}
	return nil
}

// SignedFile resolves the network and CID of a signature route to the workspace's File, read
// from the API server (writes that follow must not start from a stale cache).
func (o *Ops) SignedFile(ctx context.Context, t Scope, network, rawCID string) (*agentsv1.File, error) {
	nw, err := ParseNetwork(network)
	if err != nil {
		return nil, err
	}
	if _, err := cid.Parse(rawCID); err != nil {
		return nil, Because(Invalid, MsgInvalidCID, err)
	}
	f := &agentsv1.File{}
	if err := o.d.APIReader.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: FileObjectName(nw, rawCID)}, f); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, Fail(NotFound, MsgFileNotFound)
		}
		return nil, err
	}
	return f, nil
}

// AddSignature verifies a wallet's EIP-712 signature over (address, cid, first upload date)
// and attaches it to the file. A file holds one signature: a second is a Conflict. sig nil
// is a body that was not a JSON object (`MsgSignatureBody`); the file is resolved first, so
// a missing file reads as such whatever the body.
func (o *Ops) AddSignature(ctx context.Context, t Scope, network, rawCID string, sig *Signature) (*agentsv1.File, error) {
	f, err := o.SignedFile(ctx, t, network, rawCID)
	if err != nil {
		return nil, err
	}
	if sig == nil {
		return nil, Fail(Invalid, MsgSignatureBody)
	}
	if err := sig.validate(); err != nil {
		return nil, err
	}
	if f.Spec.Signature != nil {
		return nil, Fail(Conflict, MsgAlreadySigned)
	}
	if err := eip712.Verify(sig.Address, f.Spec.CID, f.Spec.CreatedAt, sig.Signature); err != nil {
		return nil, Because(Invalid, MsgSignatureMismatch, err)
	}
	f.Spec.Signature = &agentsv1.FileSignature{Address: sig.Address, Signature: sig.Signature, SignedAt: metav1.NewTime(o.d.Now())}
	// The read resourceVersion guards the write: of two concurrent signers one wins, the
	// other learns the file is signed.
	if err := o.d.Client.Update(ctx, f); err != nil {
		if apierrors.IsConflict(err) {
			return nil, Fail(Conflict, MsgAlreadySigned)
		}
		return nil, err
	}
	return f, nil
}

// FileSignature returns the file's signature (NotFound `Signature not found` when unsigned).
func (o *Ops) FileSignature(ctx context.Context, t Scope, network, rawCID string) (*agentsv1.File, error) {
	f, err := o.SignedFile(ctx, t, network, rawCID)
	if err != nil {
		return nil, err
	}
	if f.Spec.Signature == nil {
		return nil, Fail(NotFound, MsgSignatureNotFound)
	}
	return f, nil
}

// DeleteSignature removes the file's signature.
func (o *Ops) DeleteSignature(ctx context.Context, t Scope, network, rawCID string) error {
	f, err := o.FileSignature(ctx, t, network, rawCID)
	if err != nil {
		return err
	}
	f.Spec.Signature = nil
	return o.d.Client.Update(ctx, f)
}
