package cri

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/crivk/crivk/credentialprovider"
	"github.com/crivk/crivk/cri/pullrecords"
	"github.com/crivk/crivk/podutil"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Image failure reasons, as the kubelet reports them in a container's
// waiting state (pkg/kubelet/images/types.go).
const (
	ReasonErrImagePull       = "ErrImagePull"
	ReasonImagePullBackOff   = "ImagePullBackOff"
	ReasonErrImageNeverPull  = "ErrImageNeverPull"
	ReasonInvalidImageName   = "InvalidImageName"
	ReasonImageInspectError  = "ImageInspectError"
	ReasonCreateConfigError  = "CreateContainerConfigError"
	ReasonCreateContainerErr = "CreateContainerError"
	ReasonRunContainerError  = "RunContainerError"
	ReasonCrashLoopBackOff   = "CrashLoopBackOff"
)

// ImageError is a failure to make a container's image available.
type ImageError struct {
	Reason string // one of the Reason* image constants
	Image  string
	Err    error
}

func (e *ImageError) Error() string { return e.Err.Error() }
func (e *ImageError) Unwrap() error { return e.Err }

// ImagePresent returns the image's reference (its ID) if the runtime has it.
func (r *Runtime) ImagePresent(ctx context.Context, image string) (string, bool, error) {
	resp, err := r.is.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: image}, false)
	if err != nil {
		return "", false, err
	}
	if resp.GetImage() == nil {
		return "", false, nil
	}
	return resp.GetImage().GetId(), true, nil
}

// imageUser is the user image ref runs as (CRI ImageStatus: its UID, or
// else its user name); an image that names none gets an empty ImageUser,
// which verifyRunAsNonRoot takes as root, as the kubelet's getImageUser.
func (r *Runtime) imageUser(ctx context.Context, ref string) (*ImageUser, error) {
	resp, err := r.is.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: ref}, false)
	if err != nil {
		return nil, fmt.Errorf("reading the user of image %s: %w", ref, err)
	}
	img := resp.GetImage()
	if img == nil {
		return nil, fmt.Errorf("reading the user of image %s: the runtime does not have it", ref)
	}
	u := &ImageUser{Username: img.GetUsername()}
	if img.GetUid() != nil {
		uid := img.GetUid().GetValue()
		u.UID, u.Username = &uid, ""
	}
	return u, nil
}

// PullSpan is when one image pull started and ended.
type PullSpan struct {
	Start, End time.Time
}

// ensureImage makes c's image available per its imagePullPolicy and returns
// the reference to create the container with, and when it pulled, if it
// did. Failures are *ImageError with the kubelet's reason; whether to back
// off is the plan's decision.
func (r *Runtime) ensureImage(ctx context.Context, pod *v1.Pod, c *v1.Container, sandbox *runtimeapi.PodSandboxConfig) (string, *PullSpan, error) {
	return r.ensure(ctx, pod, imageRequest{image: c.Image, policy: c.ImagePullPolicy,
		record: func(typ, reason, message string) { r.containerEvent(pod, c, typ, reason, message) }}, sandbox)
}

// imageRequest is one image a pod needs: a container's, or an image
// volume's (imagevolumes.go). Both go through ensure, the kubelet's
// EnsureImageExists: the same pull policy, pull secrets, records of pulled
// images and events.
type imageRequest struct {
	image  string
	policy v1.PullPolicy // "" is the API server's default for image
	// record records one of the pull's events: on the container for its
	// image, on the pod for an image volume (the kubelet's objRef).
	record func(typ, reason, message string)
}

// ensure makes req's image available per its pull policy and returns the
// reference the runtime knows it by, and when it pulled, if it did.
func (r *Runtime) ensure(ctx context.Context, pod *v1.Pod, req imageRequest, sandbox *runtimeapi.PodSandboxConfig) (string, *PullSpan, error) {
	image := req.image
	if image == "" || strings.ContainsAny(image, " \t\n") || strings.HasSuffix(image, ":") {
		return "", nil, &ImageError{Reason: ReasonInvalidImageName, Image: image,
			Err: fmt.Errorf("Failed to apply default image tag %q: couldn't parse image name %q: invalid reference format", image, image)}
	}
	policy := req.policy
	if policy == "" {
		policy = podutil.DefaultPullPolicy(image)
	}
	// The pod's credentials are looked up once, when first needed
	// (reading its secrets may record a FailedToRetrieveImagePullSecret
	// event; the credential providers may run their plugins).
	podCreds := sync.OnceValue(func() []trackedAuth { return r.podCredentials(ctx, pod, image) })
	if policy != v1.PullAlways {
		ref, ok, err := r.ImagePresent(ctx, image)
		if err != nil {
			return "", nil, &ImageError{Reason: ReasonImageInspectError, Image: image,
				Err: fmt.Errorf("Failed to inspect image %q: %w", image, err)}
		}
		if ok && r.pulls == nil {
			req.record(v1.EventTypeNormal, "Pulled", fmt.Sprintf("Container image %q already present on machine", image))
			return ref, nil, nil
		}
		// KubeletEnsureSecretPulledImages: an image present is used only
		// if the records say this pod may (pullrecords, doc.go); else it
		// is pulled again with the pod's own credentials.
		if ok && !r.pulls.MustAttemptPull(ctx, image, ref, func() pullrecords.PodCredentials { return podPullCredentials(podCreds()) }) {
			req.record(v1.EventTypeNormal, "Pulled", fmt.Sprintf("Container image %q already present on machine and can be accessed by the pod", image))
			return ref, nil, nil
		}
		if policy == v1.PullNever {
			// The same answer whether the image is absent or present but
			// not for this pod: its presence is not revealed.
			msg := fmt.Sprintf("Container image %q is not present with pull policy of Never", image)
			req.record(v1.EventTypeWarning, ReasonErrImageNeverPull, msg)
			return "", nil, &ImageError{Reason: ReasonErrImageNeverPull, Image: image, Err: errors.New(msg)}
		}
	}
	creds := podCreds()
	if r.pulls != nil {
		if err := r.pulls.RecordPullIntent(ctx, image); err != nil {
			return "", nil, &ImageError{Reason: ReasonErrImagePull, Image: image,
				Err: fmt.Errorf("Failed to record image pull intent for container image %q: %w", image, err)}
		}
	}
	req.record(v1.EventTypeNormal, "Pulling", fmt.Sprintf("Pulling image %q", image))
	start := r.clock.Now()
	if len(creds) == 0 {
		creds = []trackedAuth{{}} // anonymous
	}
	var (
		ref    string
		waited time.Duration
		err    error
		used   trackedAuth
	)
	for _, cred := range creds {
		ref, waited, err = r.pull(ctx, image, cred.auth, sandbox)
		used = cred
		if err == nil || errors.Is(err, context.Canceled) {
			break
		}
	}
	if r.pulls != nil {
		if err != nil {
			r.pulls.RecordPullFailed(ctx, image)
		} else {
			r.pulls.RecordPulled(ctx, image, ref, pulledWith(used))
		}
	}
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return "", nil, err
		}
		req.record(v1.EventTypeWarning, "Failed", fmt.Sprintf("Failed to pull image %q: %v", image, err))
		return "", nil, &ImageError{Reason: ReasonErrImagePull, Image: image, Err: err}
	}
	took := r.clock.Since(start)
	msg := fmt.Sprintf("Successfully pulled image %q in %v (%v including waiting)", image, took-waited, took)
	if st, err := r.is.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: ref}, false); err == nil && st.GetImage() != nil {
		msg += fmt.Sprintf(". Image size: %d bytes.", st.GetImage().GetSize())
	}
	req.record(v1.EventTypeNormal, "Pulled", msg)
	return ref, &PullSpan{Start: start, End: start.Add(took)}, nil
}

// podCredentials are the pod's credentials for image, in the order the
// pull tries them, the kubelet's (its keyring is the pod's secrets, then
// the node's keyring, then the credential providers): its pull secrets',
// most specific first, then the node's credential provider plugins'
// (credentialprovider.Keyring, asked for the image's repository, the
// kubelet's repoToPull). crivk has no node-wide keyring (the kubelet's
// config.json files).
func (r *Runtime) podCredentials(ctx context.Context, pod *v1.Pod, image string) []trackedAuth {
	var out []trackedAuth
	if r.helper != nil {
		out = pullCredentials(image, r.helper.PullSecrets(ctx, pod))
	}
	if r.providers == nil {
		return out
	}
	repo, err := pullrecords.Repository(image)
	if err != nil {
		return out
	}
	who := credentialprovider.Pod{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, ServiceAccountName: pod.Spec.ServiceAccountName}
	for _, c := range r.providers.Lookup(ctx, who, repo) {
		t := trackedAuth{auth: &runtimeapi.AuthConfig{Username: c.Username, Password: c.Password}}
		if sa := c.ServiceAccount; sa != nil {
			t.serviceAccount = &pullrecords.ServiceAccount{UID: sa.UID, Namespace: sa.Namespace, Name: sa.Name}
		}
		out = append(out, t)
	}
	return out
}

// podPullCredentials are what the records' check compares (the kubelet's
// getPodCredentials): the secrets creds came from, and the first service
// account a provider gave one for; node-wide credentials are left out.
func podPullCredentials(creds []trackedAuth) pullrecords.PodCredentials {
	var out pullrecords.PodCredentials
	for _, c := range creds {
		switch {
		case c.secret != nil:
			out.Secrets = append(out.Secrets, *c.secret)
		case c.serviceAccount != nil && out.ServiceAccount == nil:
			out.ServiceAccount = c.serviceAccount
		}
	}
	return out
}

// pulledWith is what a pulled record keeps of the credential a pull
// succeeded with (the kubelet's trackedToImagePullCreds): the secret, the
// service account of a provider in token mode, or node-wide access for an
// anonymous pull or a provider's credential given for no service account.
func pulledWith(c trackedAuth) *pullrecords.Credentials {
	switch {
	case c.secret != nil:
		return &pullrecords.Credentials{KubernetesSecrets: []pullrecords.Secret{*c.secret}}
	case c.serviceAccount != nil:
		return &pullrecords.Credentials{KubernetesServiceAccounts: []pullrecords.ServiceAccount{*c.serviceAccount}}
	}
	return &pullrecords.Credentials{NodePodsAccessible: true}
}

// puller coalesces concurrent pulls of one image into one CRI call and
// bounds how many pulls run at once (the kubelet's serialized or
// parallel image puller).
type puller struct {
	// sem holds one token per running pull; nil means no limit.
	sem chan struct{}

	mu       sync.Mutex
	inflight map[string]*pullCall // by image; guarded by mu
}

// pullCall is one CRI pull that several pods may wait for.
type pullCall struct {
	done    chan struct{}
	ref     string
	err     error
	waiters int // callers that joined; guarded by puller.mu
}

func newPuller(maxParallel int) *puller {
	p := &puller{inflight: map[string]*pullCall{}}
	if maxParallel > 0 {
		p.sem = make(chan struct{}, maxParallel)
	}
	return p
}

// pull pulls image once for every concurrent caller and returns its
// reference and how long this caller waited for a free pull slot.
func (r *Runtime) pull(ctx context.Context, image string, auth *runtimeapi.AuthConfig, sandbox *runtimeapi.PodSandboxConfig) (string, time.Duration, error) {
	p := r.puller
	// Pulls with different credentials are not the same pull.
	key := image
	if auth != nil {
		key += "\x00" + auth.ServerAddress + "\x00" + auth.Username + "\x00" + auth.Auth + "\x00" + auth.IdentityToken
	}
	p.mu.Lock()
	call, joined := p.inflight[key]
	if joined {
		call.waiters++
	} else {
		call = &pullCall{done: make(chan struct{})}
		p.inflight[key] = call
	}
	p.mu.Unlock()
	if joined {
		select {
		case <-call.done:
			return call.ref, 0, call.err
		case <-ctx.Done():
			return "", 0, ctx.Err()
		}
	}

	defer func() {
		p.mu.Lock()
		delete(p.inflight, key)
		p.mu.Unlock()
		close(call.done)
	}()
	var waited time.Duration
	if p.sem != nil {
		start := r.clock.Now()
		select {
		case p.sem <- struct{}{}:
		case <-ctx.Done():
			call.err = ctx.Err()
			return "", 0, call.err
		}
		defer func() { <-p.sem }()
		waited = r.clock.Since(start)
	}
	call.ref, call.err = r.is.PullImage(ctx, &runtimeapi.ImageSpec{Image: image, UserSpecifiedImage: image}, auth, sandbox)
	return call.ref, waited, call.err
}

// ImageFsInfo reports the filesystems the runtime keeps images on (the
// node API's /stats/summary).
func (r *Runtime) ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	return r.is.ImageFsInfo(ctx)
}
