package apiserver

import (
	"context"
	"errors"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// verifyDomain asks the controller to look the TXT record up now (annotation
// agentplane.io/verify-requested-at) and waits up to VerifyWait for that check: 200 with the
// domain as checked, or 202 with the domain as it stands when the check has not happened yet.
// Subdomains and verified domains answer 200 at once.
func (s *Server) verifyDomain(r *http.Request, c *Caller) (*Response, error) {
	ctx := r.Context()
	d, err := s.getDomain(ctx, c, r.PathValue("agentId"), r.PathValue("domainId"))
	if err != nil {
		return nil, err
	}
	if d.Spec.CustomDomain == "" || meta.IsStatusConditionTrue(d.Status.Conditions, agentsv1.DomainVerified) {
		return ok(map[string]any{"domain": s.viewDomain(d)})
	}
	requested := metav1.NewTime(s.opts.Now()).Rfc3339Copy()
	orig := d.DeepCopy()
	if d.Annotations == nil {
		d.Annotations = map[string]string{}
	}
	d.Annotations[agentsv1.AnnotationVerifyRequested] = requested.UTC().Format(time.RFC3339)
	if err := s.opts.Client.Patch(ctx, d, client.MergeFrom(orig)); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, withCause(http.StatusNotFound, msgDomainNotFound, err)
		}
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, s.domainOpts().VerifyWait)
	defer cancel()
	err = s.ops.WaitFor(wctx, d, func() (bool, error) {
		lc := d.Status.LastChecked
		return lc != nil && !lc.Before(&requested) || meta.IsStatusConditionTrue(d.Status.Conditions, agentsv1.DomainVerified), nil
	})
	switch {
	case err == nil:
		return ok(map[string]any{"domain": s.viewDomain(d)})
	case ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
		return &Response{Status: http.StatusAccepted, Body: map[string]any{"domain": s.viewDomain(d)}}, nil
	}
	return nil, err
}
