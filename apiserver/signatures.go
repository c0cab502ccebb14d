package apiserver

import (
	"errors"
	"io"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/cid"
	"github.com/agentplane/agentplane/internal/eip712"
)

// Signature messages.
const (
	msgSignatureFields   = "signature and address are required"
	msgSignatureBody     = "Body must be a JSON object with signature and address"
	msgAddressFormat     = "Invalid address: expected 0x followed by 40 hex digits"
	msgAddressChecksum   = "Invalid address: EIP-55 checksum mismatch"
	msgSignatureFormat   = "Invalid signature: expected 0x followed by 130 hex digits"
	msgSignatureMismatch = "Signature does not match address"
	msgAlreadySigned     = "File already has a signature"
	msgSignatureNotFound = "Signature not found"
)

// signatureRequest is the body of POST /v3/files/{network}/signature/{cid}.
type signatureRequest struct {
	Signature string `json:"signature"`
	Address   string `json:"address"`
}

// decodeSignatureBody parses and checks a signature body, whatever its Content-Type (the SDK
// may send text/plain): both fields present, address and signature well-formed.
func decodeSignatureBody(raw []byte) (signatureRequest, error) {
	var req signatureRequest
	if err := decodeJSONBytes(raw, &req, msgSignatureBody); err != nil {
		return req, err
	}
	if req.Signature == "" || req.Address == "" {
		return req, errorf(http.StatusBadRequest, msgSignatureFields)
	}
	switch err := eip712.CheckAddress(req.Address); {
	case errors.Is(err, eip712.ErrAddressChecksum):
		return req, errorf(http.StatusBadRequest, msgAddressChecksum)
	case err != nil:
		return req, errorf(http.StatusBadRequest, msgAddressFormat)
	}
	if err := eip712.CheckSignature(req.Signature); err != nil {
		return req, errorf(http.StatusBadRequest, msgSignatureFormat)
	}
	return req, nil
}

// signedFile resolves the network and CID of a signature route to the caller's File, read
// from the API server (writes that follow must not start from a stale cache).
func (s *Server) signedFile(r *http.Request, c *Caller) (*agentsv1.File, error) {
	network, err := parseNetwork(r.PathValue("network"))
	if err != nil {
		return nil, err
	}
	raw := r.PathValue("cid")
	if _, err := cid.Parse(raw); err != nil {
		return nil, withCause(http.StatusBadRequest, msgInvalidCID, err)
	}
	f := &agentsv1.File{}
	if err := s.opts.APIReader.Get(r.Context(), client.ObjectKey{Namespace: c.Namespace, Name: fileObjectName(network, raw)}, f); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, errorf(http.StatusNotFound, msgFileNotFound)
		}
		return nil, err
	}
	return f, nil
}

// addSignature verifies a wallet's EIP-712 signature over (address, cid, first upload date)
// and attaches it to the file. A file holds one signature: a second is 409.
func (s *Server) addSignature(r *http.Request, c *Caller) (*Response, error) {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	f, err := s.signedFile(r, c)
	if err != nil {
		return nil, err
	}
	req, err := decodeSignatureBody(raw)
	if err != nil {
		return nil, err
	}
	if f.Spec.Signature != nil {
		return nil, errorf(http.StatusConflict, msgAlreadySigned)
	}
	if err := eip712.Verify(req.Address, f.Spec.CID, f.Spec.CreatedAt, req.Signature); err != nil {
		return nil, withCause(http.StatusBadRequest, msgSignatureMismatch, err)
	}
	f.Spec.Signature = &agentsv1.FileSignature{Address: req.Address, Signature: req.Signature, SignedAt: metav1.NewTime(s.opts.Now())}
	// The read resourceVersion guards the write: of two concurrent signers one wins, the
	// other learns the file is signed.
	if err := s.opts.Client.Update(r.Context(), f); err != nil {
		if apierrors.IsConflict(err) {
			return nil, errorf(http.StatusConflict, msgAlreadySigned)
		}
		return nil, err
	}
	return ok(data(map[string]string{"cid": f.Spec.CID, "signature": req.Signature}))
}

func (s *Server) getSignature(r *http.Request, c *Caller) (*Response, error) {
	f, err := s.signedFile(r, c)
	if err != nil {
		return nil, err
	}
	if f.Spec.Signature == nil {
		return nil, errorf(http.StatusNotFound, msgSignatureNotFound)
	}
	return ok(data(map[string]string{"cid": f.Spec.CID, "signature": f.Spec.Signature.Signature}))
}

func (s *Server) deleteSignature(r *http.Request, c *Caller) (*Response, error) {
	f, err := s.signedFile(r, c)
	if err != nil {
		return nil, err
	}
	if f.Spec.Signature == nil {
		return nil, errorf(http.StatusNotFound, msgSignatureNotFound)
	}
	f.Spec.Signature = nil
	if err := s.opts.Client.Update(r.Context(), f); err != nil {
		return nil, err
	}
	return ok(data(nil))
}
