package ops

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
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
	"github.com/agentplane/agentplane/internal/adapters/clawhub"
	"github.com/agentplane/agentplane/internal/adapters/storage"
)

// Skill messages. The contract fixes the 400 of the skills limit; the others are ours.
//
// Codes chosen where the contract is silent:
//   - a bundle that fails the checks (zip-slip, symlinks, zip bomb, no SKILL.md) or is over the
//     download cap: Unprocessable — the request was well-formed, the registry's content is not
//     acceptable;
//   - no storage configured: Unavailable `Storage not configured`, like the other
//     storage-backed operations (a missing dependency, not a bad request);
//   - the registry unreachable, timing out or failing with 5xx: Unavailable; any other
//     unexpected registry answer: BadGateway.
const (
	MsgSkillNotFound       = "Skill not found"
	MsgSkillsMax           = "Validation failed: skills exceeds maximum of 10"
	MsgSkillConflict       = "Skill version conflict"
	MsgInvalidSlug         = "Invalid slug"
	MsgSkillCIDsRequired   = "skillCids is required"
	MsgRegistryUnavailable = "Skill registry unavailable"
	MsgRegistryError       = "Skill registry error"
	MsgBundleTooLarge      = "Skill bundle too large"
	MsgInvalidBundle       = "Invalid skill bundle"
	// MaxAgentSkills is the most skills one agent attaches (the contract's limit).
	MaxAgentSkills = 10
)

// maxSkillDisplayName bounds a skill's display name from the registry.
const maxSkillDisplayName = 200

// maxPreviousCIDs bounds the earlier versions a Skill remembers.
const maxPreviousCIDs = 20

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

// CheckSkillSlug refuses a slug ClawHub cannot hold (`Invalid slug`). InstallSkill applies it
// first; a door may apply it before it reads the request's body, so a bad slug is named
// whatever the body.
func CheckSkillSlug(slug string) error {
	if !clawhub.ValidSlug(slug) {
		return Fail(Invalid, MsgInvalidSlug)
	}
	return nil
}

// SkillInstall is what InstallSkill did.
type SkillInstall struct {
	// Skill is the workspace's Skill as installed.
	Skill *agentsv1.Skill
	// Stored is the bundle this install stored (nil when that version was installed already:
	// the Skill controller records its size in status).
	Stored *storage.Object
	// Created is true when the Skill is new, false when it existed (same version, or another
	// version replaced).
	Created bool
}

// InstallSkill downloads a skill from ClawHub (version "" = the registry's latest), checks and
// stores its bundle, and records it as the workspace's Skill named after the slug.
func (o *Ops) InstallSkill(ctx context.Context, t Scope, slug, version string) (SkillInstall, error) {
	if err := CheckSkillSlug(slug); err != nil {
		return SkillInstall{}, err
	}
	if version != "" && !clawhub.ValidVersion(version) {
		return SkillInstall{}, Fail(Invalid, MsgInvalidVersion)
	}
	if o.d.Files == nil {
		return SkillInstall{}, Fail(Unavailable, MsgStorageMissing)
	}
	info, err := clawhub.New(o.registryURL()).Skill(ctx, slug)
	if err != nil {
		return SkillInstall{}, registryError(err)
	}
	if version == "" {
		version = info.LatestVersion
	}
	if version == "" {
		return SkillInstall{}, Fail(NotFound, MsgSkillNotFound)
	}
	existing := &agentsv1.Skill{}
	err = o.d.APIReader.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: SkillObjectName(slug)}, existing)
	found := err == nil
	switch {
	case found && existing.Spec.Version == version:
		return SkillInstall{Skill: existing}, nil
	case err != nil && !apierrors.IsNotFound(err):
		return SkillInstall{}, err
	}
	obj, err := o.fetchBundle(ctx, t.Namespace, slug, version)
	if err != nil {
		return SkillInstall{}, err
	}
	if found {
		if err := o.updateSkillVersion(ctx, existing, version, obj.CID, info.DisplayName); err != nil {
			return SkillInstall{}, err
		}
		return SkillInstall{Skill: existing, Stored: &obj}, nil
	}
	return o.createSkill(ctx, t, slug, version, info.DisplayName, obj)
}

// createSkill records a new Skill for a stored bundle. A concurrent install of the same slug
// that won is a success when it installed the same version.
func (o *Ops) createSkill(ctx context.Context, t Scope, slug, version, displayName string, obj storage.Object) (SkillInstall, error) {
	sk := &agentsv1.Skill{
		ObjectMeta: metav1.ObjectMeta{Name: SkillObjectName(slug), Namespace: t.Namespace},
		Spec:       agentsv1.SkillSpec{Slug: slug},
	}
	o.setSkillVersion(sk, version, obj.CID, displayName)
	if err := o.d.Client.Create(ctx, sk); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			return SkillInstall{}, err
		}
		if err := o.d.APIReader.Get(ctx, client.ObjectKeyFromObject(sk), sk); err != nil {
			return SkillInstall{}, err
		}
		if sk.Spec.Version != version {
			return SkillInstall{}, Fail(Conflict, MsgSkillConflict)
		}
		return SkillInstall{Skill: sk}, nil
	}
	return SkillInstall{Skill: sk, Stored: &obj, Created: true}, nil
}

// registryURL is the ClawHub installs download from.
func (o *Ops) registryURL() string {
	if o.d.ClawHubURL != "" {
		return strings.TrimRight(o.d.ClawHubURL, "/")
	}
	return clawhub.DefaultURL
}

// setSkillVersion points sk at a new bundle, keeping the old one in the previous CIDs.
func (o *Ops) setSkillVersion(sk *agentsv1.Skill, version, cid, displayName string) {
	if old := sk.Spec.CID; old != "" && old != cid {
		prev := []string{old}
		for _, p := range sk.CIDs()[1:] {
			if p != cid && p != old && len(prev) < maxPreviousCIDs {
				prev = append(prev, p)
			}
		}
		metav1.SetMetaDataAnnotation(&sk.ObjectMeta, agentsv1.AnnotationSkillPreviousCIDs, strings.Join(prev, ","))
	}
	sk.Spec.Version, sk.Spec.CID, sk.Spec.Registry = version, cid, o.registryURL()
	if displayName != "" {
		if len(displayName) > maxSkillDisplayName {
			displayName = displayName[:maxSkillDisplayName]
		}
		sk.Spec.DisplayName = displayName
	}
	metav1.SetMetaDataAnnotation(&sk.ObjectMeta, agentsv1.AnnotationSkillInstalledAt, o.d.Now().UTC().Format(time.RFC3339Nano))
}

// updateSkillVersion points sk (as read) at a new bundle and writes it. A conflict from a
// writer that left the spec as read (the Skill controller's status writes) is retried on a
// fresh read; one where the spec changed (a concurrent install or update) is the contract's
// Conflict `Skill version conflict`.
func (o *Ops) updateSkillVersion(ctx context.Context, sk *agentsv1.Skill, version, cid, displayName string) error {
	read := sk.Spec
	o.setSkillVersion(sk, version, cid, displayName)
	err := retry.RetryOnConflict(specRetry, func() error {
		err := o.d.Client.Update(ctx, sk)
		if !apierrors.IsConflict(err) {
			return err
		}
		cur := &agentsv1.Skill{}
		if gerr := o.d.APIReader.Get(ctx, client.ObjectKeyFromObject(sk), cur); gerr != nil {
			return gerr
		}
		if !equality.Semantic.DeepEqual(cur.Spec, read) {
			return Fail(Conflict, MsgSkillConflict) // no API cause: not retried as a conflict
		}
		o.setSkillVersion(cur, version, cid, displayName)
		*sk = *cur
		return err
	})
	return skillWriteError(err)
}

// fetchBundle downloads slug@version, checks the bundle and stores it in the workspace's
// skills space. Nothing is stored unless the checks pass.
func (o *Ops) fetchBundle(ctx context.Context, namespace, slug, version string) (storage.Object, error) {
	zipBytes, err := clawhub.New(o.registryURL()).Download(ctx, slug, version)
	if err != nil {
		return storage.Object{}, registryError(err)
	}
	if _, err := clawhub.CheckBundle(zipBytes); err != nil {
		return storage.Object{}, registryError(err)
	}
	if o.d.Files == nil {
		return storage.Object{}, Fail(Unavailable, MsgStorageMissing)
	}
	obj, err := o.d.Files.Put(ctx, storage.SkillsSpace(namespace), bytes.NewReader(zipBytes))
	if err != nil {
		if errors.Is(err, storage.ErrUnavailable) {
			return storage.Object{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		return storage.Object{}, err
	}
	return obj, nil
}

// registryError maps registry and bundle failures.
func registryError(err error) error {
	var be *clawhub.BundleError
	switch {
	case errors.As(err, &be):
		return Because(Unprocessable, MsgInvalidBundle+": "+be.Reason, err)
	case errors.Is(err, clawhub.ErrTooLarge):
		return Because(Unprocessable, MsgBundleTooLarge, err)
	case errors.Is(err, clawhub.ErrNotFound):
		return Because(NotFound, MsgSkillNotFound, err)
	case errors.Is(err, clawhub.ErrInvalidSlug):
		return Because(Invalid, MsgInvalidSlug, err)
	case errors.Is(err, clawhub.ErrUnavailable):
		return Because(Unavailable, MsgRegistryUnavailable, err)
	case errors.Is(err, clawhub.ErrRegistry):
		return Because(BadGateway, MsgRegistryError, err)
	}
	return err
}

// skillWriteError maps a failed Skill update: a concurrent change is a version conflict.
func skillWriteError(err error) error {
	if apierrors.IsConflict(err) {
		return Because(Conflict, MsgSkillConflict, err)
	}
	if apierrors.IsNotFound(err) {
		return Because(NotFound, MsgSkillNotFound, err)
	}
	return err
}

// Skills lists the workspace's Skills live (those not being deleted), sorted by slug.
func (o *Ops) Skills(ctx context.Context, t Scope) ([]agentsv1.Skill, error) {
	var list agentsv1.SkillList
	if err := o.d.APIReader.List(ctx, &list, client.InNamespace(t.Namespace)); err != nil {
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

// Skill reads a Skill of the workspace's workspace by object name (a name the API server refuses
// is simply not found).
func (o *Ops) Skill(ctx context.Context, t Scope, id string) (*agentsv1.Skill, error) {
	sk := &agentsv1.Skill{}
	if err := o.d.APIReader.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: id}, sk); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
			return nil, Because(NotFound, MsgSkillNotFound, err)
		}
		return nil, err
	}
	return sk, nil
}
