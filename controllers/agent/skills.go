package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/clawhub"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/adapters/storage"
)

// +kubebuilder:rbac:groups=agentplane.io,resources=skills,verbs=get;list;watch

// errSkillsPending: some attached bundles could not be unpacked yet; the reconcile is retried.
var errSkillsPending = errors.New("attached skills not unpacked yet")

// syncSkills makes the agent's home hold exactly the attached skills: the bundle of every
// CID in spec.skills is read from storage (space `<namespace>/skills`), checked again and
// unpacked into `<workspace>/skills/<slug>/` (replacing that directory), and the directory of
// a skill no longer attached is removed. status.installedSkills records the CIDs whose files
// are in place, step by step, so a failure part-way keeps an honest record. It does nothing
// when spec.skills and status.installedSkills already agree.
//
// A CID is mapped to its slug through the workspace's Skills (current or earlier versions). An
// unknown CID (the cache lags a fresh install, or the Skill is gone) and transient storage or
// runtime failures return an error so the reconcile is retried; a bundle that is missing from
// storage or fails the checks is reported as a Warning event and skipped.
func (r *Reconciler) syncSkills(ctx context.Context, agent *agentsv1.Agent) error {
	want := make([]string, 0, len(agent.Spec.Skills))
	for _, as := range agent.Spec.Skills {
		want = append(want, as.CID)
	}
	if last, ok := r.unpacked.load(agent.UID); ok && !sameSet(last, agent.Status.InstalledSkills) {
		// The status write of the pass that last changed skills/ was lost (see homeRecord).
		agent.Status.InstalledSkills = slices.Clone(last)
	}
	if sameSet(want, agent.Status.InstalledSkills) {
		return nil
	}
	if r.Skills == nil || r.Engine == nil {
		r.event(agent, corev1.EventTypeWarning, "SkillsUnavailable", "SyncSkills", "no skill storage is configured: attached skills are not unpacked")
		return nil
	}
	slugs, err := r.skillSlugs(ctx, agent.Namespace, append(slices.Clone(want), agent.Status.InstalledSkills...))
	if err != nil {
		return fmt.Errorf("list skills: %w", err)
	}
	slugOf := func(cid string) string { return slugs[cid] }
	keep := map[string]bool{} // slugs that stay attached
	for _, id := range want {
		if slug := slugOf(id); slug != "" {
			keep[slug] = true
		}
	}
	installed := slices.Clone(agent.Status.InstalledSkills)
	defer func() {
		agent.Status.InstalledSkills = installed
		r.unpacked.store(agent.UID, slices.Clone(installed))
	}()

	for _, id := range agent.Status.InstalledSkills {
		if slices.Contains(want, id) {
			continue
		}
		// A slug that stays attached (another version) is replaced below, not removed.
		if slug := slugOf(id); slug != "" && !keep[slug] {
			if err := r.removeSkillDir(ctx, agent, slug); err != nil {
				return skillRuntimeError(ctx, err)
			}
		}
		installed = slices.DeleteFunc(installed, func(c string) bool { return c == id })
	}
	pending := 0
	for _, id := range want {
		if slices.Contains(installed, id) {
			continue
		}
		slug := slugOf(id)
		if slug == "" {
			pending++
			continue
		}
		err := r.unpackSkill(ctx, agent, slug, id)
		switch {
		case errors.Is(err, storage.ErrNotFound), errors.Is(err, clawhub.ErrInvalidBundle):
			r.event(agent, corev1.EventTypeWarning, "SkillUnpackFailed", "SyncSkills", "skill %s (%s): %v", slug, id, err)
			continue
		case err != nil:
			return skillRuntimeError(ctx, err)
		}
		// The directory now holds this version only.
		installed = slices.DeleteFunc(installed, func(c string) bool { return c != id && slugOf(c) == slug })
		installed = append(installed, id)
		r.event(agent, corev1.EventTypeNormal, "SkillInstalled", "SyncSkills", "skill %s unpacked into the agent's home", slug)
	}
	if pending > 0 {
		return fmt.Errorf("%w: %d bundle(s) of no known Skill", errSkillsPending, pending)
	}
	return nil
}

// skillSlugs maps each of cids to the slug of a Skill of namespace that answers to it
// (IndexSkillCID: its current or an earlier version); a CID of no known Skill is left out.
func (r *Reconciler) skillSlugs(ctx context.Context, namespace string, cids []string) (map[string]string, error) {
	slugs := make(map[string]string, len(cids))
	for _, c := range cids {
		var list agentsv1.SkillList
		if err := r.List(ctx, &list, client.InNamespace(namespace), client.MatchingFields{agentsv1.IndexSkillCID: c}); err != nil {
			return nil, err
		}
		for i := range list.Items {
			if sk := &list.Items[i]; clawhub.ValidSlug(sk.Spec.Slug) {
				slugs[c] = sk.Spec.Slug
				break
			}
		}
	}
	return slugs, nil
}

// unpackSkill reads the bundle cid from storage and writes its files into skills/<slug>/,
// after removing what that directory held.
func (r *Reconciler) unpackSkill(ctx context.Context, agent *agentsv1.Agent, slug, cid string) error {
	rc, _, err := r.Skills.Get(ctx, storage.SkillsSpace(agent.Namespace), cid)
	if err != nil {
		return err
	}
	defer rc.Close()
	raw, err := io.ReadAll(io.LimitReader(rc, clawhub.DefaultMaxDownloadBytes+1))
	if err != nil {
		return storage.Unavailable("read skill bundle", err)
	}
	if len(raw) > clawhub.DefaultMaxDownloadBytes {
		return &clawhub.BundleError{Reason: "bundle over the download cap"}
	}
	bundle, err := clawhub.CheckBundle(raw)
	if err != nil {
		return err
	}
	if err := r.removeSkillDir(ctx, agent, slug); err != nil {
		return err
	}
	base := path.Join(r.Engine.Layout().SkillsDir, slug)
	for _, f := range bundle.Files {
		if err := r.Runtime.WriteFile(ctx, agent, base+"/"+f.Path, f.Data); err != nil {
			return fmt.Errorf("write skill file %s: %w", f.Path, err)
		}
	}
	return nil
}

// removeSkillDir runs `rm -rf -- skills/<slug>` in the agent's home.
func (r *Reconciler) removeSkillDir(ctx context.Context, agent *agentsv1.Agent, slug string) error {
	l := r.Engine.Layout()
	dir := strings.TrimPrefix(path.Join(l.SkillsDir, slug), l.WorkspaceDir+"/")
	res, err := r.Runtime.Exec(ctx, agent, runtime.ExecRequest{Argv: []string{"rm", "-rf", "--", dir}})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("%w: rm %s exited %d: %s", runtime.ErrExec, dir, res.ExitCode, bytes.TrimSpace(res.Stderr))
	}
	return nil
}

// skillRuntimeError keeps a not-yet-running agent (no pod to write into) quiet: the pass that
// sees the gateway start unpacks the skills. Other failures are returned for a retry.
func skillRuntimeError(ctx context.Context, err error) error {
	if errors.Is(err, runtime.ErrNotRunning) {
		log.FromContext(ctx).V(1).Info("skills wait for the agent's runtime", "reason", err.Error())
		return nil
	}
	return fmt.Errorf("sync skills: %w", err)
}

// sameSet reports whether a and b hold the same strings (order and duplicates aside).
func sameSet(a, b []string) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	for _, x := range b {
		if !slices.Contains(a, x) {
			return false
		}
	}
	return true
}
