package apiserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/auth"
	"github.com/agentplane/agentplane/internal/clawhub"
	"github.com/agentplane/agentplane/internal/ops"
	"github.com/agentplane/agentplane/internal/storage"
)

// Skill messages. The contract fixes the 400 of the skills limit; the others are ours.
//
// Statuses chosen where the contract is silent:
//   - a bundle that fails the checks (zip-slip, symlinks, zip bomb, no SKILL.md) or is over the
//     download cap: 422 — the request was well-formed, the registry's content is not acceptable;
//   - no storage configured: 503 `Storage not configured`, like the other storage-backed
//     routes of this facade (a missing dependency, not a bad request);
//   - the registry unreachable, timing out or failing with 5xx: 503; any other unexpected
//     registry answer: 502.
const (
	msgSkillNotFound       = "Skill not found"
	msgSkillsMax           = "Validation failed: skills exceeds maximum of 10"
	msgSkillConflict       = "Skill version conflict"
	msgInvalidSlug         = "Invalid slug"
	msgSkillCIDsRequired   = "skillCids is required"
	msgRegistryUnavailable = "Skill registry unavailable"
	msgRegistryError       = "Skill registry error"
	msgBundleTooLarge      = "Skill bundle too large"
	msgInvalidBundle       = "Invalid skill bundle"
	// MaxAgentSkills is the most skills one agent attaches (the contract's limit).
	MaxAgentSkills = 10
)

// maxPreviousCIDs bounds the earlier versions a Skill remembers.
const maxPreviousCIDs = 20

// +kubebuilder:rbac:groups=agentplane.io,resources=skills,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=agentplane.io,resources=skills/status,verbs=get;update;patch

// SkillObjectName is the Skill's object name for a slug: the slug itself when it is a valid
// object name, else a sanitized form with a hash (slugs may hold '_', names may not).
func SkillObjectName(slug string) string {
	if len(validation.IsDNS1123Subdomain(slug)) == 0 {
		return slug
	}
	sum := sha256.Sum256([]byte(slug))
	clean := strings.Trim(strings.NewReplacer("_", "-", ".", "-").Replace(slug), "-")
	if len(clean) > 100 {
		clean = clean[:100]
	}
	return "sk-" + clean + "-" + hex.EncodeToString(sum[:5])
}

// skillView is a Skill as the REST API shows it.
type skillView struct {
	ID          string    `json:"id"`
	Slug        string    `json:"slug"`
	Version     string    `json:"version"`
	CID         string    `json:"cid"`
	DisplayName string    `json:"displayName,omitempty"`
	Registry    string    `json:"registry,omitempty"`
	Size        int64     `json:"size,omitempty"`
	InstalledAt time.Time `json:"installedAt"`
}

func viewSkill(sk *agentsv1.Skill) skillView {
	v := skillView{
		ID: sk.Name, Slug: sk.Spec.Slug, Version: sk.Spec.Version, CID: sk.Spec.CID,
		DisplayName: sk.Spec.DisplayName, Registry: sk.Spec.Registry, Size: sk.Status.Size,
		InstalledAt: sk.CreationTimestamp.UTC(),
	}
	if t, err := time.Parse(time.RFC3339Nano, sk.Annotations[agentsv1.AnnotationSkillInstalledAt]); err == nil {
		v.InstalledAt = t.UTC()
	}
	return v
}

// skillRoutes registers the skill routes: installs from ClawHub (skills:write), the
// workspace's skills (agents:read), and their attachment to agents (skills:write; the agent's
// gateway token is accepted on its own agent).
func (s *Server) skillRoutes() {
	read := access{scope: auth.ScopeAgentsRead, perm: auth.PermRead}
	write := access{scope: auth.ScopeSkillsWrite, perm: auth.PermWrite}
	own := func(a access) access { a.gateway = true; return a }
	s.handle("POST /v0/clawhub/{slug}/install", write, s.installSkill)
	s.handle("GET /v0/skills", read, s.listSkills)
	s.handle("GET /v0/agents/{agentId}/skills", own(read), s.listAgentSkills)
	s.handle("POST /v0/agents/{agentId}/skills", own(write), s.attachSkills)
	s.handle("DELETE /v0/agents/{agentId}/skills/{skillId}", own(write), s.detachSkill)
	s.handle("POST /v0/agents/{agentId}/skills/{skillId}/update", own(write), s.updateAgentSkill)
}

// registryURL is the ClawHub the facade installs from.
func (s *Server) registryURL() string {
	if s.opts.ClawHubURL != "" {
		return strings.TrimRight(s.opts.ClawHubURL, "/")
	}
	return clawhub.DefaultURL
}

type installSkillRequest struct {
	Version string `json:"version"`
}

// installSkill downloads a skill from ClawHub, checks and stores its bundle, and records it
// as the workspace's Skill named after the slug: 201 when new, 200 when that version is
// already installed or another version was replaced.
func (s *Server) installSkill(r *http.Request, c *Caller) (*Response, error) {
	slug := r.PathValue("slug")
	if !clawhub.ValidSlug(slug) {
		return nil, errorf(http.StatusBadRequest, msgInvalidSlug)
	}
	var req installSkillRequest
	if err := decodeOptionalJSON(r, &req); err != nil {
		return nil, err
	}
	if req.Version != "" && !clawhub.ValidVersion(req.Version) {
		return nil, errorf(http.StatusBadRequest, msgInvalidVersion)
	}
	if s.opts.Files == nil {
		return nil, errorf(http.StatusServiceUnavailable, ops.MsgStorageMissing)
	}
	ctx := r.Context()
	info, err := clawhub.New(s.registryURL()).Skill(ctx, slug)
	if err != nil {
		return nil, registryError(err)
	}
	version := req.Version
	if version == "" {
		version = info.LatestVersion
	}
	if version == "" {
		return nil, errorf(http.StatusNotFound, msgSkillNotFound)
	}
	existing := &agentsv1.Skill{}
	err = s.opts.APIReader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: SkillObjectName(slug)}, existing)
	found := err == nil
	switch {
	case found && existing.Spec.Version == version:
		return ok(map[string]any{"skill": viewSkill(existing)})
	case err != nil && !apierrors.IsNotFound(err):
		return nil, err
	}
	obj, err := s.fetchBundle(ctx, c.Namespace, slug, version)
	if err != nil {
		return nil, err
	}
	if found {
		if err := s.updateSkillVersion(ctx, existing, version, obj.CID, info.DisplayName); err != nil {
			return nil, err
		}
		return ok(map[string]any{"skill": viewStoredSkill(existing, obj)})
	}
	sk := &agentsv1.Skill{
		ObjectMeta: metav1.ObjectMeta{Name: SkillObjectName(slug), Namespace: c.Namespace},
		Spec:       agentsv1.SkillSpec{Slug: slug},
	}
	s.setSkillVersion(sk, version, obj.CID, info.DisplayName)
	if err := s.opts.Client.Create(ctx, sk); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			return nil, err
		}
		// A concurrent install of the same slug won: the same version is a success.
		if err := s.opts.APIReader.Get(ctx, client.ObjectKeyFromObject(sk), sk); err != nil {
			return nil, err
		}
		if sk.Spec.Version != version {
			return nil, errorf(http.StatusConflict, msgSkillConflict)
		}
		return ok(map[string]any{"skill": viewSkill(sk)})
	}
	return created(map[string]any{"skill": viewStoredSkill(sk, obj)})
}

// setSkillVersion points sk at a new bundle, keeping the old one in the previous CIDs.
func (s *Server) setSkillVersion(sk *agentsv1.Skill, version, cid, displayName string) {
	if old := sk.Spec.CID; old != "" && old != cid {
		prev := []string{old}
		for _, p := range (sk).CIDs()[1:] {
			if p != cid && p != old && len(prev) < maxPreviousCIDs {
				prev = append(prev, p)
			}
		}
		metav1.SetMetaDataAnnotation(&sk.ObjectMeta, agentsv1.AnnotationSkillPreviousCIDs, strings.Join(prev, ","))
	}
	sk.Spec.Version, sk.Spec.CID, sk.Spec.Registry = version, cid, s.registryURL()
	if displayName != "" {
		sk.Spec.DisplayName = truncate(displayName, 200)
	}
	metav1.SetMetaDataAnnotation(&sk.ObjectMeta, agentsv1.AnnotationSkillInstalledAt, s.opts.Now().UTC().Format(time.RFC3339Nano))
}

// updateSkillVersion points sk (as read) at a new bundle and writes it. A conflict from a
// writer that left the spec as read (the Skill controller's status writes) is retried on a
// fresh read; one where the spec changed (a concurrent install or update) is the contract's
// 409.
func (s *Server) updateSkillVersion(ctx context.Context, sk *agentsv1.Skill, version, cid, displayName string) error {
	read := sk.Spec
	s.setSkillVersion(sk, version, cid, displayName)
	err := retry.RetryOnConflict(skillRetry, func() error {
		err := s.opts.Client.Update(ctx, sk)
		if !apierrors.IsConflict(err) {
			return err
		}
		cur := &agentsv1.Skill{}
		if gerr := s.opts.APIReader.Get(ctx, client.ObjectKeyFromObject(sk), cur); gerr != nil {
			return gerr
		}
		if !equality.Semantic.DeepEqual(cur.Spec, read) {
			return errorf(http.StatusConflict, msgSkillConflict) // no cause: not retried as a conflict
		}
		s.setSkillVersion(cur, version, cid, displayName)
		*sk = *cur
		return err
	})
	return skillWriteError(err)
}

// viewStoredSkill is the install's answer: the size is the bundle's the install just stored
// (the Skill controller records it in status, from storage, on its own pass).
func viewStoredSkill(sk *agentsv1.Skill, obj storage.Object) skillView {
	v := viewSkill(sk)
	v.Size = obj.Size
	return v
}

// fetchBundle downloads slug@version, checks the bundle and stores it in the workspace's
// skills space. Nothing is stored unless the checks pass.
func (s *Server) fetchBundle(ctx context.Context, namespace, slug, version string) (storage.Object, error) {
	zipBytes, err := clawhub.New(s.registryURL()).Download(ctx, slug, version)
	if err != nil {
		return storage.Object{}, registryError(err)
	}
	if _, err := clawhub.CheckBundle(zipBytes); err != nil {
		return storage.Object{}, registryError(err)
	}
	if s.opts.Files == nil {
		return storage.Object{}, errorf(http.StatusServiceUnavailable, ops.MsgStorageMissing)
	}
	obj, err := s.opts.Files.Put(ctx, storage.SkillsSpace(namespace), bytes.NewReader(zipBytes))
	if err != nil {
		if errors.Is(err, storage.ErrUnavailable) {
			return storage.Object{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		return storage.Object{}, err
	}
	return obj, nil
}

// registryError maps registry and bundle failures to answers.
func registryError(err error) error {
	var be *clawhub.BundleError
	switch {
	case errors.As(err, &be):
		return withCause(http.StatusUnprocessableEntity, msgInvalidBundle+": "+be.Reason, err)
	case errors.Is(err, clawhub.ErrTooLarge):
		return withCause(http.StatusUnprocessableEntity, msgBundleTooLarge, err)
	case errors.Is(err, clawhub.ErrNotFound):
		return withCause(http.StatusNotFound, msgSkillNotFound, err)
	case errors.Is(err, clawhub.ErrInvalidSlug):
		return withCause(http.StatusBadRequest, msgInvalidSlug, err)
	case errors.Is(err, clawhub.ErrUnavailable):
		return withCause(http.StatusServiceUnavailable, msgRegistryUnavailable, err)
	case errors.Is(err, clawhub.ErrRegistry):
		return withCause(http.StatusBadGateway, msgRegistryError, err)
	}
	return err
}

// skillWriteError maps a failed Skill update: a concurrent change is a version conflict.
func skillWriteError(err error) error {
	if apierrors.IsConflict(err) {
		return withCause(http.StatusConflict, msgSkillConflict, err)
	}
	if apierrors.IsNotFound(err) {
		return withCause(http.StatusNotFound, msgSkillNotFound, err)
	}
	return err
}

// decodeOptionalJSON is decodeJSON for a body that may be empty.
func decodeOptionalJSON(r *http.Request, v any) error {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		var maxErr *http.MaxBytesError
		if errors.As(err, &maxErr) {
			return withCause(http.StatusRequestEntityTooLarge, msgBodyTooLarge, err)
		}
		return withCause(http.StatusBadRequest, msgInvalidBody, err)
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	return decodeJSONBytes(raw, v, msgInvalidBody)
}

// listSkills answers the workspace's installed skills, by slug.
func (s *Server) listSkills(r *http.Request, c *Caller) (*Response, error) {
	list, err := s.workspaceSkills(r.Context(), c.Namespace)
	if err != nil {
		return nil, err
	}
	out := make([]skillView, 0, len(list))
	for i := range list {
		out = append(out, viewSkill(&list[i]))
	}
	return ok(map[string]any{"skills": out})
}

// workspaceSkills lists the workspace's Skills live, sorted by slug.
func (s *Server) workspaceSkills(ctx context.Context, namespace string) ([]agentsv1.Skill, error) {
	var list agentsv1.SkillList
	if err := s.opts.APIReader.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	items := list.Items[:0]
	for _, sk := range list.Items {
		if sk.DeletionTimestamp == nil {
			items = append(items, sk)
		}
	}
	sort.Slice(items, func(i, j int) bool { return items[i].Spec.Slug < items[j].Spec.Slug })
	return items, nil
}

// getSkill reads a Skill of the caller's workspace by object name.
func (s *Server) getSkill(ctx context.Context, c *Caller, id string) (*agentsv1.Skill, error) {
	sk := &agentsv1.Skill{}
	if err := s.opts.APIReader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: id}, sk); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
			return nil, withCause(http.StatusNotFound, msgSkillNotFound, err)
		}
		return nil, err
	}
	return sk, nil
}
