package facade

import (
	"net/http"
)

// verifyDomain asks the controller to look the TXT record up now and waits up to VerifyWait
// for that check: 200 with the domain as checked, or 202 with the domain as it stands when
// the check has not happened yet. Subdomains and verified domains answer 200 at once.
func (s *Server) verifyDomain(r *http.Request, c *Caller) (*Response, error) {
	d, checked, err := s.ops.VerifyDomain(r.Context(), c.scope(), r.PathValue("agentId"), r.PathValue("domainId"))
	if err != nil {
		return nil, err
	}
	if !checked {
		return &Response{Status: http.StatusAccepted, Body: map[string]any{"domain": viewDomain(d)}}, nil
	}
	return ok(map[string]any{"domain": viewDomain(d)})
}
