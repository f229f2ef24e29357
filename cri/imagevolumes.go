package cri

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Image volumes (volumes[].image, the ImageVolume feature, on by default
// since Kubernetes v1.35): an OCI image mounted read-only into the
// containers that mount the volume. The node makes the image available,
// the runtime mounts it (CRI Mount.image, containerd 2.1 and newer); there
// is nothing on the node's file system (the volume manager's image volume
// has no directory). As the kubelet's kuberuntime:
//
//   - ComputePodActions puts in the plan (ImageVolumes) every image volume
//     of the pod whose pull back-off is not running, when the plan starts
//     a container; a container that mounts a volume whose back-off runs is
//     held back in ImagePullBackOff "Back-off pulling image ...: <the
//     last error>", as the kubelet's EnsureImageExists answers during the
//     back-off.
//   - SyncPod makes those images available after the sandbox and before
//     any container starts (ensureImageVolumes, the kubelet's
//     getImageVolumes): through ensure, the path of container images, so
//     with the volume's pullPolicy, the pod's pull secrets and the records
//     of pulled images (KubeletEnsureSecretPulledImages: a private image
//     on the node is never mounted for a pod that cannot show its
//     credentials), and with the same events, recorded on the pod (the
//     kubelet's objRef for an image volume is the pod's). A failed pull
//     starts the volume's pull back-off, keyed by pod and image as the
//     kubelet's ("<pod uid>_<image>").
//   - Each container start takes the result of the volumes it mounts
//     (containerImageVolumes, the kubelet's toKubeContainerImageVolumes):
//     a failure leaves the container Waiting with the pull's reason and
//     message (ErrImagePull, ErrImageNeverPull, ...) and it is not created;
//     otherwise the volumes' image specs go to GenerateRunContainerOptions,
//     whose mounts carry them (Mount{Image, ImageSubPath, Readonly}).
//     Containers that do not mount a failed volume start. The mount is
//     then treated as any other: recursiveReadOnly (rro.go) and, in a
//     hostUsers: false pod, the ID mappings (idmapped) apply to it, as the
//     kubelet's makeMounts and applyPlatformSpecificContainerConfig make no
//     exception for it (containerd idmaps the image's layers itself and
//     drops the mount's mappings).
//
// The kubelet v1.35.4 (and v1.36) calls getImageVolumes at every SyncPod,
// so an image volume's "Pulled" event is recorded at every sync of a
// running pod (kubernetes/kubernetes#138644); v1.37 (#138655, SyncPod's
// lazyStart) does it only when the sync starts a container, which is what
// crivk does.

// ImageVolumes are the image specs of a container's image volumes by volume
// name, the kubelet's kubecontainer.ImageVolumes: the image as the runtime
// knows it (the reference a pull or ImageStatus returned).
type ImageVolumes = map[string]*runtimeapi.ImageSpec

// imageVolumePull is what ensureImageVolumes got for one image volume:
// its spec, or the error (an *ImageError for the kubelet's image failures)
// the containers that mount it fail with.
type imageVolumePull struct {
	spec *runtimeapi.ImageSpec
	err  error
}

// ImageVolumeBackOffKey is the pull back-off key of pod's image volume of
// image reference: the pod's UID and the image, as the kubelet's image
// manager keys its back-off ("<pod uid>_<image>"), so two volumes of one
// image share it. Container keys (BackOffKey) start "<pod uid>/".
func ImageVolumeBackOffKey(pod *v1.Pod, reference string) string {
	return string(pod.UID) + "_" + reference
}

// imageVolume is pod's volume name if it is an image volume, else nil.
func imageVolume(pod *v1.Pod, name string) *v1.ImageVolumeSource {
	for i := range pod.Spec.Volumes {
		if pod.Spec.Volumes[i].Name == name {
			return pod.Spec.Volumes[i].Image
		}
	}
	return nil
}

// imageVolumeHold is the waiting of a container that mounts an image volume
// whose pull back-off runs (bo at the plan's time), the last such mount's as
// the kubelet's toKubeContainerImageVolumes keeps the last failure; ok is
// false when no mount of c waits.
func imageVolumeHold(pod *v1.Pod, c *v1.Container, bo BackOffView) (w Waiting, ok bool) {
	if c == nil || bo == nil {
		return Waiting{}, false
	}
	for _, vm := range c.VolumeMounts {
		src := imageVolume(pod, vm.Name)
		if src == nil {
			continue
		}
		if last, wait := bo.Pull(ImageVolumeBackOffKey(pod, src.Reference)); wait {
			w, ok = Waiting{Reason: ReasonImagePullBackOff,
				Message: fmt.Sprintf("Back-off pulling image %q: %s", src.Reference, last)}, true
		}
	}
	return w, ok
}

// planImageVolumes is the plan's ImageVolumes: when the plan starts a
// container, every image volume of the pod whose pull back-off does not
// run, in the pod's order.
func planImageVolumes(pod *v1.Pod, a *PodActions, bo BackOffView) []string {
	if a.NextInit < 0 && len(a.ContainersToStart) == 0 && len(a.SidecarsToStart) == 0 && len(a.EphemeralToStart) == 0 {
		return nil
	}
	var out []string
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		if vol.Image == nil {
			continue
		}
		if bo != nil {
			if _, wait := bo.Pull(ImageVolumeBackOffKey(pod, vol.Image.Reference)); wait {
				continue
			}
		}
		out = append(out, vol.Name)
	}
	return out
}

// ensureImageVolumes makes the images of the plan's image volumes
// available (the kubelet's getImageVolumes), before any container of the
// sync starts. A failed pull starts the volume's pull back-off; a pull
// that succeeds ends it. Pulls that happened go to res.Pulls.
func (r *Runtime) ensureImageVolumes(ctx context.Context, pod *v1.Pod, names []string, sandbox *runtimeapi.PodSandboxConfig,
	backoff *BackOffs, now time.Time, res *SyncResult) map[string]imageVolumePull {
	if len(names) == 0 {
		return nil
	}
	out := make(map[string]imageVolumePull, len(names))
	for _, name := range names {
		src := imageVolume(pod, name)
		if src == nil {
			continue
		}
		ref, pulled, err := r.ensure(ctx, pod, imageRequest{image: src.Reference, policy: src.PullPolicy,
			record: func(typ, reason, message string) { r.event(pod, typ, reason, message) }}, sandbox)
		if pulled != nil {
			res.Pulls = append(res.Pulls, *pulled)
		}
		key := ImageVolumeBackOffKey(pod, src.Reference)
		if err != nil {
			var ie *ImageError
			if errors.As(err, &ie) && ie.Reason == ReasonErrImagePull {
				backoff.pullFailed(key, now, ie.Reason+": "+ie.Error())
			}
			out[name] = imageVolumePull{err: err}
			continue
		}
		backoff.pullSucceeded(key)
		out[name] = imageVolumePull{spec: &runtimeapi.ImageSpec{
			Image:              ref,
			UserSpecifiedImage: src.Reference,
			Annotations:        maps.Clone(pod.Annotations),
		}}
	}
	return out
}

// containerImageVolumes is the image volumes container c mounts, from what
// ensureImageVolumes got (the kubelet's toKubeContainerImageVolumes). When
// one of them failed, the error is the last failure in c's volumeMounts'
// order, and c must not be created.
func containerImageVolumes(c *v1.Container, pulls map[string]imageVolumePull) (ImageVolumes, error) {
	if len(pulls) == 0 {
		return nil, nil
	}
	out := ImageVolumes{}
	var lastErr error
	for _, vm := range c.VolumeMounts {
		p, ok := pulls[vm.Name]
		if !ok {
			continue
		}
		if p.err != nil {
			lastErr = fmt.Errorf("image volume %q: %w", vm.Name, p.err)
			continue
		}
		out[vm.Name] = p.spec
	}
	if lastErr != nil {
		return nil, lastErr
	}
	return out, nil
}
