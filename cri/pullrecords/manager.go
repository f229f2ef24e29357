package pullrecords

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/clock"
)

// Config is what the node's configuration says about pulled images.
type Config struct {
	// Dir holds the records: <root-dir>/image_manager, the kubelet's.
	Dir string
	// Policy is imagePullCredentialsVerificationPolicy ("": the
	// kubelet's default, NeverVerifyPreloadedImages).
	Policy string
	// Allowlist is preloadedImagesVerificationAllowlist (only with
	// NeverVerifyAllowlistedImages).
	Allowlist []string
	// Clock stamps the records' lastUpdatedTime; nil is the real clock.
	Clock clock.PassiveClock
}

// Secret is a pod's pull secret that applies to an image: its coordinates
// and a hash of the credential taken from it.
type Secret = kubeletv1beta1.ImagePullSecret

// ServiceAccount is the service account a credential provider plugin in
// service account token mode gave a pod its credential for.
type ServiceAccount = kubeletv1beta1.ImagePullServiceAccount

// Credentials are those an image was pulled with (RecordPulled).
type Credentials = kubeletv1beta1.ImagePullCredentials

// PodCredentials are a pod's credentials for an image that are not
// node-wide: its pull secrets that apply to the image, and the service
// account a credential provider in token mode gave it credentials for
// (nil: none; the first such, as the kubelet's getPodCredentials).
type PodCredentials struct {
	Secrets        []Secret
	ServiceAccount *ServiceAccount
}

// Image is one image the runtime holds, by ID, with its names.
type Image struct {
	ID                    string
	RepoTags, RepoDigests []string
}

// Manager is the node's record of image pulls and the decision made from
// it (doc.go). It is safe for concurrent use.
type Manager struct {
	policy *policy
	store  *store
	clock  clock.PassiveClock
	// images lists the runtime's images, once, before the first use
	// (initialize).
	images func(context.Context) ([]Image, error)
	init   sync.Once

	// mu orders every read and write of the records and guards intents.
	mu sync.Mutex
	// intents counts the pulls of each image in flight (the intent file
	// stays while any is).
	intents map[string]int
}

// New validates cfg (Validate) and opens the records under cfg.Dir.
// images lists the runtime's images: before the first decision, the
// intents a previous run left for images the runtime has become records
// with no credentials.
func New(cfg Config, images func(context.Context) ([]Image, error)) (*Manager, error) {
	p, err := newPolicy(cfg.Policy, cfg.Allowlist)
	if err != nil {
		return nil, err
	}
	if cfg.Dir == "" {
		return nil, fmt.Errorf("image pull records: no directory")
	}
	s, err := newStore(cfg.Dir)
	if err != nil {
		return nil, err
	}
	m := &Manager{policy: p, store: s, clock: cfg.Clock, images: images, intents: map[string]int{}}
	if m.clock == nil {
		m.clock = clock.RealClock{}
	}
	return m, nil
}

// initialize turns the intents a previous run left into pulled records
// with no credentials, for the images the runtime has: they may have been
// pulled by crivk, with credentials nobody recorded, so every pod must
// show its own (the kubelet's PullManager.initialize). Intents of images
// the runtime does not have stay: the image still counts as crivk's.
func (m *Manager) initialize(ctx context.Context) {
	intents, err := m.store.listIntents()
	if err != nil {
		log.G(ctx).WithError(err).Warn("image pull records: some pull intents could not be read")
	}
	if len(intents) == 0 || m.images == nil {
		return
	}
	imgs, err := m.images(ctx)
	if err != nil {
		log.G(ctx).WithError(err).Warn("image pull records: listing the runtime's images")
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, img := range imgs {
		for _, image := range intents {
			if !slices.Contains(img.RepoTags, image) && !slices.Contains(img.RepoDigests, image) {
				continue
			}
			if err := m.writePulledLocked(image, img.ID, nil); err != nil {
				log.G(ctx).WithError(err).WithField("image", image).Warn("image pull records: recording an interrupted pull")
				continue
			}
			_ = m.store.deleteIntent(image)
		}
	}
}

// RecordPullIntent is called before image is pulled.
func (m *Manager) RecordPullIntent(ctx context.Context, image string) error {
	m.init.Do(func() { m.initialize(ctx) })
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.store.writeIntent(image); err != nil {
		return fmt.Errorf("failed to record image pull intent: %w", err)
	}
	m.intents[image]++
	return nil
}

// RecordPulled is called after image was pulled as imageRef with creds
// (NodePodsAccessible for an anonymous pull). A record that cannot be
// written leaves the intent, so the image still counts as crivk's.
func (m *Manager) RecordPulled(ctx context.Context, image, imageRef string, creds *Credentials) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.writePulledLocked(image, imageRef, creds); err != nil {
		log.G(ctx).WithError(err).WithField("image", image).Error("image pull records: writing the pulled record")
		return
	}
	m.endIntentLocked(ctx, image)
}

// RecordPullFailed is called after a pull of image failed.
func (m *Manager) RecordPullFailed(ctx context.Context, image string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.endIntentLocked(ctx, image)
}

func (m *Manager) endIntentLocked(ctx context.Context, image string) {
	if m.intents[image] > 1 {
		m.intents[image]--
		return
	}
	if err := m.store.deleteIntent(image); err != nil {
		log.G(ctx).WithError(err).WithField("image", image).Error("image pull records: removing the pull intent")
		return
	}
	delete(m.intents, image)
}

// writePulledLocked merges creds for image's repository into imageRef's
// record and writes it if it changed. nil creds record the image as
// crivk's without credentials. An unreadable record is replaced.
func (m *Manager) writePulledLocked(image, imageRef string, creds *Credentials) error {
	repo, err := Repository(image)
	if err != nil {
		return err
	}
	rec, err := m.store.getPulled(imageRef)
	if err != nil {
		rec = nil
	}
	changed := false
	if rec == nil {
		rec = &kubeletv1beta1.ImagePulledRecord{ImageRef: imageRef, CredentialMapping: map[string]Credentials{}}
		if creds != nil {
			rec.CredentialMapping[repo] = *creds
		}
		changed = true
	} else {
		changed = mergeCredentials(rec, repo, creds)
	}
	if !changed {
		return nil
	}
	rec.LastUpdatedTime = metav1.NewTime(m.clock.Now())
	return m.store.writePulled(rec)
}

// mergeCredentials adds creds to rec's entry for repo, as the kubelet's
// pulledRecordMergeNewCreds: node-wide access absorbs everything, a
// secret replaces the hash of one with the same coordinates, a service
// account is added once (by namespace, name and UID). It reports whether
// rec changed.
func mergeCredentials(rec *kubeletv1beta1.ImagePulledRecord, repo string, creds *Credentials) bool {
	if creds == nil || !creds.NodePodsAccessible && len(creds.KubernetesSecrets) == 0 && len(creds.KubernetesServiceAccounts) == 0 {
		return false
	}
	if rec.CredentialMapping == nil {
		rec.CredentialMapping = map[string]Credentials{}
	}
	cur, ok := rec.CredentialMapping[repo]
	switch {
	case !ok:
		rec.CredentialMapping[repo] = *creds
		return true
	case cur.NodePodsAccessible:
		return false
	case creds.NodePodsAccessible:
		rec.CredentialMapping[repo] = Credentials{NodePodsAccessible: true}
		return true
	case len(creds.KubernetesSecrets) == 0:
		// Service accounts only (the kubelet merges a record's secrets or
		// its service accounts, never both at once).
		sas := slices.Clone(cur.KubernetesServiceAccounts)
		for _, sa := range creds.KubernetesServiceAccounts {
			if !slices.Contains(sas, sa) {
				sas = append(sas, sa)
			}
		}
		if len(sas) == len(cur.KubernetesServiceAccounts) {
			return false
		}
		slices.SortFunc(sas, func(a, b ServiceAccount) int {
			return strings.Compare(a.Namespace+"\x00"+a.Name+"\x00"+a.UID, b.Namespace+"\x00"+b.Name+"\x00"+b.UID)
		})
		cur.KubernetesServiceAccounts = sas
		rec.CredentialMapping[repo] = cur
		return true
	}
	changed := false
	secrets := slices.Clone(cur.KubernetesSecrets)
	for _, s := range creds.KubernetesSecrets {
		i := slices.IndexFunc(secrets, func(c Secret) bool { return sameCoordinates(c, s) })
		switch {
		case i < 0:
			secrets = append(secrets, s)
			changed = true
		case secrets[i].CredentialHash != s.CredentialHash:
			secrets[i].CredentialHash = s.CredentialHash
			changed = true
		}
	}
	if !changed {
		return false
	}
	slices.SortFunc(secrets, func(a, b Secret) int {
		return strings.Compare(a.Namespace+"\x00"+a.Name+"\x00"+a.UID, b.Namespace+"\x00"+b.Name+"\x00"+b.UID)
	})
	cur.KubernetesSecrets = secrets
	rec.CredentialMapping[repo] = cur
	return true
}

func sameCoordinates(a, b Secret) bool {
	return a.UID == b.UID && a.Namespace == b.Namespace && a.Name == b.Name
}

// rememberLimit: a secret matched by hash or coordinates alone is added
// to the record only while the record holds fewer secrets (the kubelet's
// writeRecordWhileMatchingLimit, against unbounded writes when namespaces
// come and go).
const rememberLimit = 100

// MustAttemptPull reports whether a pod must pull image, which the runtime
// already holds as imageRef, with its own credentials before using it
// (doc.go, "The decision"). podCredentials returns the pod's pull secrets
// that apply to image and its service account credential; it is called at
// most once, outside the lock, and only when the records make it matter.
func (m *Manager) MustAttemptPull(ctx context.Context, image, imageRef string, podCredentials func() PodCredentials) bool {
	if imageRef == "" {
		return true
	}
	m.init.Do(func() { m.initialize(ctx) })
	in, err := m.readState(image, imageRef)
	if err != nil {
		log.G(ctx).WithError(err).WithField("image", image).Error("image pull records: cannot read the records of the image, it must be pulled")
		return true
	}
	in.podCredentials = podCredentials
	d := decide(m.policy, image, in)
	if d.remember != nil {
		m.mu.Lock()
		err := m.writePulledLocked(image, imageRef, &Credentials{KubernetesSecrets: []Secret{*d.remember}})
		m.mu.Unlock()
		if err != nil {
			log.G(ctx).WithError(err).WithField("image", image).Warn("image pull records: recording a matching secret")
		}
	}
	return d.pull
}

// readState reads what the records say about image and imageRef.
func (m *Manager) readState(image, imageRef string) (decisionInput, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec, err := m.store.getPulled(imageRef)
	if err != nil {
		return decisionInput{}, err
	}
	in := decisionInput{record: rec, pulledByCrivk: rec != nil || m.intents[image] > 0}
	if !in.pulledByCrivk {
		exists, err := m.store.intentExists(image)
		if err != nil {
			return decisionInput{}, fmt.Errorf("failed to check existence of an image pull intent: %w", err)
		}
		in.pulledByCrivk = exists
	}
	return in, nil
}

// decisionInput is what decide reads.
type decisionInput struct {
	// record is the image's pulled record; nil: none.
	record *kubeletv1beta1.ImagePulledRecord
	// pulledByCrivk: a pulled record or a pull intent exists.
	pulledByCrivk bool
	// podCredentials are the pod's credentials for the image (called
	// lazily).
	podCredentials func() PodCredentials
}

// decision is decide's plan.
type decision struct {
	pull bool
	// remember is a pod secret that matched by hash only or by
	// coordinates only, to add to the record.
	remember *Secret
}

// decide is the kubelet's MustAttemptImagePull over readable records.
func decide(p *policy, image string, in decisionInput) decision {
	if !p.requiresVerification(image, in.pulledByCrivk) {
		return decision{}
	}
	if in.record == nil {
		return decision{pull: true}
	}
	repo, err := Repository(image)
	if err != nil {
		return decision{pull: true}
	}
	cached, ok := in.record.CredentialMapping[repo]
	switch {
	case !ok:
		return decision{pull: true}
	case cached.NodePodsAccessible:
		return decision{}
	case len(cached.KubernetesSecrets) == 0 && len(cached.KubernetesServiceAccounts) == 0:
		return decision{pull: true}
	}
	var pod PodCredentials
	if in.podCredentials != nil {
		pod = in.podCredentials()
	}
	for _, ps := range pod.Secrets {
		for _, cs := range cached.KubernetesSecrets {
			// An empty hash (hashing failed when it was recorded) never
			// matches.
			hashes := cs.CredentialHash != "" && ps.CredentialHash == cs.CredentialHash
			coords := sameCoordinates(ps, cs)
			if hashes || coords {
				d := decision{}
				if hashes != coords && len(cached.KubernetesSecrets) < rememberLimit {
					s := ps
					d.remember = &s
				}
				return d
			}
		}
	}
	// A service account a provider gave the image's credential for: the
	// same namespace, name and UID.
	if pod.ServiceAccount != nil && slices.Contains(cached.KubernetesServiceAccounts, *pod.ServiceAccount) {
		return decision{}
	}
	return decision{pull: true}
}
