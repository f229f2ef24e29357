package pullrecords

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	clocktesting "k8s.io/utils/clock/testing"
)

const (
	img  = "registry.example:5000/team/app:1"
	repo = "registry.example:5000/team/app"
	ref  = "sha256:aaaa"
)

var (
	secretA     = Secret{UID: "uid-a", Namespace: "ns1", Name: "regcred", CredentialHash: "hash-a"}
	secretACopy = Secret{UID: "uid-c", Namespace: "ns2", Name: "copy", CredentialHash: "hash-a"}          // same credential, another secret
	secretARot  = Secret{UID: "uid-a", Namespace: "ns1", Name: "regcred", CredentialHash: "hash-rotated"} // same secret, rotated
	secretB     = Secret{UID: "uid-b", Namespace: "ns1", Name: "other", CredentialHash: "hash-b"}

	saX       = ServiceAccount{UID: "sa-uid-x", Namespace: "ns1", Name: "builder"}
	saXNewUID = ServiceAccount{UID: "sa-uid-x2", Namespace: "ns1", Name: "builder"} // deleted and made again
	saY       = ServiceAccount{UID: "sa-uid-y", Namespace: "ns2", Name: "builder"}
)

func secretsOnly(s ...Secret) func() PodCredentials {
	return func() PodCredentials { return PodCredentials{Secrets: s} }
}

func record(creds map[string]Credentials) *kubeletv1beta1.ImagePulledRecord {
	return &kubeletv1beta1.ImagePulledRecord{ImageRef: ref, CredentialMapping: creds}
}

// TestDecide: the kubelet's MustAttemptImagePull, policy × how the image
// came to the node × the pod's credentials.
func TestDecide(t *testing.T) {
	bySecretA := record(map[string]Credentials{repo: {KubernetesSecrets: []Secret{secretA}}})
	bySAX := record(map[string]Credentials{repo: {KubernetesServiceAccounts: []ServiceAccount{saX}}})
	anonymous := record(map[string]Credentials{repo: {NodePodsAccessible: true}})
	interrupted := record(map[string]Credentials{}) // an intent of a previous run
	otherRepo := record(map[string]Credentials{"registry.example:5000/other": {NodePodsAccessible: true}})
	type came struct {
		record        *kubeletv1beta1.ImagePulledRecord
		pulledByCrivk bool
	}
	ways := map[string]came{
		"preloaded":                {},
		"pull in flight":           {pulledByCrivk: true},
		"pulled with secret A":     {record: bySecretA, pulledByCrivk: true},
		"pulled anonymously":       {record: anonymous, pulledByCrivk: true},
		"interrupted pull":         {record: interrupted, pulledByCrivk: true},
		"pulled as another repo":   {record: otherRepo, pulledByCrivk: true},
		"pulled with no secret ok": {record: record(map[string]Credentials{repo: {}}), pulledByCrivk: true},
		"pulled for SA X":          {record: bySAX, pulledByCrivk: true},
	}
	pods := map[string]PodCredentials{
		"no secret":            {},
		"secret A":             {Secrets: []Secret{secretA}},
		"a copy of A":          {Secrets: []Secret{secretACopy}},
		"A rotated":            {Secrets: []Secret{secretARot}},
		"another secret":       {Secrets: []Secret{secretB}},
		"another, then A":      {Secrets: []Secret{secretB, secretA}},
		"empty hash, other id": {Secrets: []Secret{{UID: "x", Namespace: "ns1", Name: "x"}}},
		"SA X":                 {ServiceAccount: &saX},
		"SA X made again":      {ServiceAccount: &saXNewUID},
		"SA Y":                 {ServiceAccount: &saY},
		"another secret, SA X": {Secrets: []Secret{secretB}, ServiceAccount: &saX},
		"secret A, SA Y":       {Secrets: []Secret{secretA}, ServiceAccount: &saY},
	}
	// want[policy][way] is the set of pods that must pull; the others do not.
	verified := map[string][]string{
		"preloaded":                allPods(pods),
		"pull in flight":           allPods(pods),
		"pulled with secret A":     {"no secret", "another secret", "empty hash, other id", "SA X", "SA X made again", "SA Y", "another secret, SA X"},
		"pulled for SA X":          {"no secret", "secret A", "a copy of A", "A rotated", "another secret", "another, then A", "empty hash, other id", "SA X made again", "SA Y", "secret A, SA Y"},
		"pulled anonymously":       nil,
		"interrupted pull":         allPods(pods),
		"pulled as another repo":   allPods(pods),
		"pulled with no secret ok": allPods(pods),
	}
	want := map[string]map[string][]string{
		NeverVerify: {},
		NeverVerifyPreloadedImages: func() map[string][]string {
			m := map[string][]string{}
			for w, ps := range verified {
				if w != "preloaded" {
					m[w] = ps
				}
			}
			return m
		}(),
		AlwaysVerify: verified,
	}
	for polName, wantPull := range want {
		p, err := newPolicy(polName, nil)
		if err != nil {
			t.Fatal(err)
		}
		for wayName, way := range ways {
			for podName, creds := range pods {
				t.Run(polName+"/"+wayName+"/"+podName, func(t *testing.T) {
					called := 0
					d := decide(p, img, decisionInput{record: way.record, pulledByCrivk: way.pulledByCrivk,
						podCredentials: func() PodCredentials { called++; return creds }})
					must := contains(wantPull[wayName], podName)
					if d.pull != must {
						t.Errorf("pull %v, want %v", d.pull, must)
					}
					if called > 1 {
						t.Errorf("pod secrets read %d times", called)
					}
					// A secret matched by hash only or by coordinates only
					// is remembered; an exact match needs no write.
					wantRemember := wayName == "pulled with secret A" && polName != NeverVerify &&
						(podName == "a copy of A" || podName == "A rotated")
					if (d.remember != nil) != wantRemember {
						t.Errorf("remember %+v, want one: %v", d.remember, wantRemember)
					}
				})
			}
		}
	}
}

func allPods(m map[string]PodCredentials) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// TestAllowlistPolicy: NeverVerifyAllowlistedImages matches the container's
// image as written, exactly or by a "/*" prefix.
func TestAllowlistPolicy(t *testing.T) {
	p, err := newPolicy(NeverVerifyAllowlistedImages, []string{"registry.example:5000/team/app", "docker.io/library/*"})
	if err != nil {
		t.Fatal(err)
	}
	for image, wantVerify := range map[string]bool{
		"registry.example:5000/team/app":   false,
		"registry.example:5000/team/app:1": true, // exact entries match the image as written
		"docker.io/library/busybox:1.36":   false,
		"busybox:1.36":                     true, // not normalised, as the kubelet
		"registry.example:5000/other:1":    true,
	} {
		for _, pulled := range []bool{false, true} {
			if got := p.requiresVerification(image, pulled); got != wantVerify {
				t.Errorf("%s (pulled by crivk %v): verification %v, want %v", image, pulled, got, wantVerify)
			}
		}
	}
}

// TestValidate: the kubelet's validation and its messages.
func TestValidate(t *testing.T) {
	tests := map[string]struct {
		policy    string
		allowlist []string
		wantErr   string
	}{
		"default":                     {},
		"each policy":                 {policy: AlwaysVerify},
		"allowlist with its policy":   {policy: NeverVerifyAllowlistedImages, allowlist: []string{"docker.io/library/busybox", "quay.io/*"}},
		"unknown policy":              {policy: "Sometimes", wantErr: `invalid configuration: option "Sometimes" specified for imagePullCredentialsVerificationPolicy. Valid options are "NeverVerify", "NeverVerifyPreloadedImages", "NeverVerifyAllowlistedImages" or "AlwaysVerify"`},
		"allowlist with other policy": {policy: NeverVerify, allowlist: []string{"quay.io/*"}, wantErr: "can't set `preloadedImagesVerificationAllowlist` if `imagePullCredentialsVertificationPolicy` is not \"NeverVerifyAllowlistedImages\""},
		"allowlist, default policy":   {allowlist: []string{"quay.io/*"}, wantErr: "can't set `preloadedImagesVerificationAllowlist`"},
		"tag":                         {policy: NeverVerifyAllowlistedImages, allowlist: []string{"docker.io/library/busybox:1.36"}, wantErr: "invalid image pattern in `preloadedImagesVerificationAllowlist`: neither tag nor digest is accepted in an image reference: docker.io/library/busybox:1.36"},
		"short name":                  {policy: NeverVerifyAllowlistedImages, allowlist: []string{"busybox"}, wantErr: "neither tag nor digest is accepted"},
		"spaces":                      {policy: NeverVerifyAllowlistedImages, allowlist: []string{" quay.io/*"}, wantErr: "leading/trailing spaces are not allowed"},
		"inner wildcard":              {policy: NeverVerifyAllowlistedImages, allowlist: []string{"quay.io/*/x"}, wantErr: "only patterns ending with '/*' are allowed"},
		"bare wildcard":               {policy: NeverVerifyAllowlistedImages, allowlist: []string{"/*"}, wantErr: "at least registry hostname is required"},
		"not a name":                  {policy: NeverVerifyAllowlistedImages, allowlist: []string{"Quay.io/UPPER"}, wantErr: "failed to parse as an image name"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := Validate(tc.policy, tc.allowlist)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("Validate: %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestRepository(t *testing.T) {
	for image, want := range map[string]string{
		"busybox":                             "docker.io/library/busybox",
		"busybox:1.36":                        "docker.io/library/busybox",
		"index.docker.io/team/app@sha256:abc": "docker.io/team/app",
		"localhost/app:1":                     "localhost/app",
		"registry.example:5000/team/app:1":    "registry.example:5000/team/app",
		"registry.example:5000/team/app":      "registry.example:5000/team/app",
	} {
		if got, err := Repository(image); err != nil || got != want {
			t.Errorf("Repository(%q) = %q, %v, want %q", image, got, err, want)
		}
	}
}

func newManager(t *testing.T, dir, policy string, images ...Image) *Manager {
	t.Helper()
	m, err := New(Config{Dir: dir, Policy: policy, Clock: clocktesting.NewFakePassiveClock(time.Date(2026, 12, 7, 2, 0, 0, 0, time.UTC))},
		func(context.Context) ([]Image, error) { return images, nil })
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestRecordsRoundTrip: a pull's intent, then its record with the
// credential that succeeded, read back by another Manager (a restart), in
// the kubelet's file layout and format.
func TestRecordsRoundTrip(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	m := newManager(t, dir, "")
	if err := m.RecordPullIntent(ctx, img); err != nil {
		t.Fatal(err)
	}
	intent := filepath.Join(dir, "pulling", fileName(img))
	b, err := os.ReadFile(intent)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"kind":"ImagePullIntent","apiVersion":"kubelet.config.k8s.io/v1beta1","image":"` + img + `"}`; string(b) != want {
		t.Errorf("intent file %s, want %s", b, want)
	}
	m.RecordPulled(ctx, img, ref, &Credentials{KubernetesSecrets: []Secret{secretA}})
	if _, err := os.Stat(intent); !os.IsNotExist(err) {
		t.Errorf("intent left after the pull: %v", err)
	}
	// Another pull of the image with another secret merges into the
	// record.
	m.RecordPulled(ctx, img, ref, &Credentials{KubernetesSecrets: []Secret{secretB}})

	restarted := newManager(t, dir, "")
	got, err := restarted.store.getPulled(ref)
	if err != nil {
		t.Fatal(err)
	}
	want := &kubeletv1beta1.ImagePulledRecord{
		TypeMeta:          metav1.TypeMeta{APIVersion: apiVersion, Kind: kindPulled},
		LastUpdatedTime:   metav1.NewTime(time.Date(2026, 12, 7, 2, 0, 0, 0, time.UTC)),
		ImageRef:          ref,
		CredentialMapping: map[string]Credentials{repo: {KubernetesSecrets: []Secret{secretB, secretA}}}, // by namespace, name, UID,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("record read back (-want +got):\n%s", diff)
	}
	if restarted.MustAttemptPull(ctx, img, ref, secretsOnly(secretB)) {
		t.Error("a pod with a recorded secret must pull after a restart")
	}
	if !restarted.MustAttemptPull(ctx, img, ref, secretsOnly()) {
		t.Error("a pod without a secret may use the image")
	}
	// An anonymous pull makes the image the node's: every pod may.
	restarted.RecordPulled(ctx, img, ref, &Credentials{NodePodsAccessible: true})
	if restarted.MustAttemptPull(ctx, img, ref, secretsOnly()) {
		t.Error("after an anonymous pull, a pod without a secret must pull")
	}
}

// TestRememberMatchedSecret: a copy of a recorded secret (same hash) is
// added to the record, so that the record knows it next time.
func TestRememberMatchedSecret(t *testing.T) {
	ctx := context.Background()
	m := newManager(t, t.TempDir(), "")
	m.RecordPulled(ctx, img, ref, &Credentials{KubernetesSecrets: []Secret{secretA}})
	if m.MustAttemptPull(ctx, img, ref, secretsOnly(secretACopy)) {
		t.Fatal("a copy of the secret must pull")
	}
	rec, err := m.store.getPulled(ref)
	if err != nil {
		t.Fatal(err)
	}
	if got := rec.CredentialMapping[repo].KubernetesSecrets; len(got) != 2 {
		t.Errorf("secrets recorded %+v, want A and its copy", got)
	}
}

// TestCorruptRecord: a record that cannot be decoded means the image must
// be pulled, whatever the policy says (the kubelet's MustAttemptImagePull
// fails safe on a read error); the next successful pull replaces it.
func TestCorruptRecord(t *testing.T) {
	ctx := context.Background()
	for name, content := range map[string]string{
		"not JSON":      "{not json",
		"unknown field": `{"kind":"ImagePulledRecord","apiVersion":"kubelet.config.k8s.io/v1beta1","imageRef":"` + ref + `","surprise":1}`,
		"other version": `{"kind":"ImagePulledRecord","apiVersion":"kubelet.config.k8s.io/v9","imageRef":"` + ref + `"}`,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			m := newManager(t, dir, NeverVerify)
			if err := os.WriteFile(filepath.Join(dir, "pulled", fileName(ref)), []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			if !m.MustAttemptPull(ctx, img, ref, secretsOnly(secretA)) {
				t.Error("a corrupt record let the pod use the image")
			}
			m.RecordPulled(ctx, img, ref, &Credentials{KubernetesSecrets: []Secret{secretA}})
			if m.MustAttemptPull(ctx, img, ref, secretsOnly()) {
				t.Error("after a pull replaced the corrupt record, NeverVerify still asks for a pull")
			}
			m2 := newManager(t, dir, AlwaysVerify)
			if m2.MustAttemptPull(ctx, img, ref, secretsOnly(secretA)) {
				t.Error("the replaced record does not hold the pull's secret")
			}
		})
	}
}

// TestInterruptedPull: an intent left by an agent that stopped mid-pull
// becomes, for an image the runtime has, a record with no credentials:
// every pod must pull, even under the default policy.
func TestInterruptedPull(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	m := newManager(t, dir, "")
	if err := m.RecordPullIntent(ctx, img); err != nil {
		t.Fatal(err)
	}
	// The agent stops here. A new one finds the image in the runtime.
	m2 := newManager(t, dir, "", Image{ID: ref, RepoTags: []string{img}})
	if !m2.MustAttemptPull(ctx, img, ref, secretsOnly(secretA)) {
		t.Error("an image whose pull was interrupted is used without a pull")
	}
	if _, err := os.Stat(filepath.Join(dir, "pulling", fileName(img))); !os.IsNotExist(err) {
		t.Errorf("the intent was not turned into a record: %v", err)
	}
	if rec, err := m2.store.getPulled(ref); err != nil || rec == nil {
		t.Errorf("no record after the restart: %v", err)
	}
}

// TestIntentCounting: two pulls of one image in flight; the intent goes
// with the last.
func TestIntentCounting(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	m := newManager(t, dir, "")
	for range 2 {
		if err := m.RecordPullIntent(ctx, img); err != nil {
			t.Fatal(err)
		}
	}
	intent := filepath.Join(dir, "pulling", fileName(img))
	m.RecordPullFailed(ctx, img)
	if _, err := os.Stat(intent); err != nil {
		t.Fatalf("intent gone with a pull still in flight: %v", err)
	}
	// While in flight the image counts as crivk's: the default policy
	// verifies it.
	if !m.MustAttemptPull(ctx, img, ref, secretsOnly()) {
		t.Error("an image being pulled counts as preloaded")
	}
	m.RecordPullFailed(ctx, img)
	if _, err := os.Stat(intent); !os.IsNotExist(err) {
		t.Errorf("intent left after the last pull: %v", err)
	}
	if m.MustAttemptPull(ctx, img, ref, secretsOnly()) {
		t.Error("an image crivk never pulled is verified under NeverVerifyPreloadedImages")
	}
}

// TestServiceAccountRecords: an image a credential provider gave a
// service account the credential for is recorded with the service
// account's coordinates (the kubelet's KubernetesServiceAccounts), merged
// once each, sorted; a pod of a recorded service account uses the image,
// another pulls; a later anonymous pull makes it the node's.
func TestServiceAccountRecords(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	m := newManager(t, dir, "")
	for _, sa := range []ServiceAccount{saY, saX, saY} {
		if err := m.RecordPullIntent(ctx, img); err != nil {
			t.Fatal(err)
		}
		m.RecordPulled(ctx, img, ref, &Credentials{KubernetesServiceAccounts: []ServiceAccount{sa}})
	}
	got, err := newManager(t, dir, "").store.getPulled(ref)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]Credentials{repo: {KubernetesServiceAccounts: []ServiceAccount{saX, saY}}}, got.CredentialMapping); diff != "" {
		t.Errorf("record (-want +got):\n%s", diff)
	}
	// A secret pull keeps the service accounts.
	m.RecordPulled(ctx, img, ref, &Credentials{KubernetesSecrets: []Secret{secretA}})
	for name, tc := range map[string]struct {
		pod  PodCredentials
		pull bool
	}{
		"SA X":            {pod: PodCredentials{ServiceAccount: &saX}},
		"SA Y":            {pod: PodCredentials{ServiceAccount: &saY}},
		"SA X made again": {pod: PodCredentials{ServiceAccount: &saXNewUID}, pull: true},
		"secret A":        {pod: PodCredentials{Secrets: []Secret{secretA}}},
		"nothing":         {pull: true},
	} {
		if must := m.MustAttemptPull(ctx, img, ref, func() PodCredentials { return tc.pod }); must != tc.pull {
			t.Errorf("%s: must pull %v, want %v", name, must, tc.pull)
		}
	}
	m.RecordPulled(ctx, img, ref, &Credentials{NodePodsAccessible: true})
	if m.MustAttemptPull(ctx, img, ref, secretsOnly()) {
		t.Error("after a node-wide pull a pod without credentials must pull")
	}
}
