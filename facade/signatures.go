package facade

import (
	"io"
	"net/http"

	"github.com/agentplane/agentplane/internal/ops"
)

// signatureRequest is the body of POST /v3/files/{network}/signature/{cid}.
type signatureRequest struct {
	Signature string `json:"signature"`
	Address   string `json:"address"`
}

// addSignature verifies a wallet's EIP-712 signature over (address, cid, first upload date)
// and attaches it to the file. The body is read whatever its Content-Type (the SDK may send
// text/plain).
func (s *Server) addSignature(r *http.Request, c *Caller) (*Response, error) {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	var sig *ops.Signature
	var req signatureRequest
	if decodeJSONBytes(raw, &req, ops.MsgSignatureBody) == nil {
		sig = &ops.Signature{Signature: req.Signature, Address: req.Address}
	}
	f, err := s.ops.AddSignature(r.Context(), c.scope(), r.PathValue("network"), r.PathValue("cid"), sig)
	if err != nil {
		return nil, err
	}
	return ok(data(map[string]string{"cid": f.Spec.CID, "signature": f.Spec.Signature.Signature}))
}

func (s *Server) getSignature(r *http.Request, c *Caller) (*Response, error) {
	f, err := s.ops.FileSignature(r.Context(), c.scope(), r.PathValue("network"), r.PathValue("cid"))
	if err != nil {
		return nil, err
	}
	return ok(data(map[string]string{"cid": f.Spec.CID, "signature": f.Spec.Signature.Signature}))
}

func (s *Server) deleteSignature(r *http.Request, c *Caller) (*Response, error) {
	if err := s.ops.DeleteSignature(r.Context(), c.scope(), r.PathValue("network"), r.PathValue("cid")); err != nil {
		return nil, err
	}
	return ok(data(nil))
}
