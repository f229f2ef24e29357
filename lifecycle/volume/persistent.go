package volume

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/crivk/crivk/podutil"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/storage/ephemeral"
)

// Persistent volumes: a pod volume that names a claim (persistentVolumeClaim)
// or is the pod's generic ephemeral volume (ephemeral: the claim
// "<pod>-<volume>" the ephemeral volume controller creates for the pod) is
// resolved through the API to the PersistentVolume bound to the claim, as
// the kubelet's desired-state populator does (createVolumeSpec,
// getPVCExtractPV, getPVSpec), with its checks and its words:
//
//	claim missing or unreadable  error processing PVC ns/claim: failed to fetch PVC from API server: <err>
//	claim being deleted without  error processing PVC ns/claim: PVC is being deleted
//	  kubernetes.io/pvc-protection
//	claim not bound              error processing PVC ns/claim: PVC is not bound
//	bound to no volume name      error processing PVC ns/claim: PVC has empty pvc.Spec.VolumeName
//	volume missing               error processing PVC ns/claim: failed to fetch PV <pv> from API server: <err>
//	volume bound to no claim, or found PV object <pv> but it has a nil pv.Spec.ClaimRef ... /
//	  to another claim's UID     found PV object <pv> but its pv.Spec.ClaimRef.UID <a> does not point to claim.UID <b>
//	ephemeral claim not          PVC ns/claim was not created for pod ns/pod (pod is not owner)
//	  controlled by the pod
//	volumeMode Block mounted     volume <name> has volumeMode Block, but is specified in volumeMounts
//
// A resolution is made once per pod volume, at the first MountPod that
// succeeds in it, and kept until UnmountPod (the kubelet processes a pod's
// volumes once, then only on ReprocessPod): a running pod keeps its volume
// when its claim is deleted later (pvc-protection keeps the claim anyway).
// After a crivk restart the resolution is made again from the API, and the
// set-up finds the mount in place.
//
// The volume's directory is named by the PersistentVolume, as the kubelet
// names it (volume.Spec.Name() of a PV spec), and messages about its set-up
// name the PersistentVolume too.

// pvcProtectionFinalizer keeps a claim in use from being removed (the
// kubelet's util.PVCProtectionFinalizer).
const pvcProtectionFinalizer = "kubernetes.io/pvc-protection"

// claimSource is a pod volume resolved to its claim and volume.
type claimSource struct {
	pvc *v1.PersistentVolumeClaim
	pv  *v1.PersistentVolume
	// readOnly: the pod's persistentVolumeClaim source says readOnly (a
	// generic ephemeral volume never does), the kubelet's
	// NewSpecFromPersistentVolume(pv, pvcReadOnly).
	readOnly bool
}

// claimName returns the claim a pod volume uses, and whether it is the
// pod's generic ephemeral volume; "" when the volume uses no claim.
func claimName(pod *v1.Pod, vol *v1.Volume) (name string, isEphemeral bool) {
	switch {
	case vol.PersistentVolumeClaim != nil:
		return vol.PersistentVolumeClaim.ClaimName, false
	case vol.Ephemeral != nil:
		return ephemeral.VolumeClaimName(pod, vol), true
	}
	return "", false
}

// resolveClaim reads the claim of vol and the volume bound to it. The
// error is the kubelet's (the table above).
func (m *Manager) resolveClaim(ctx context.Context, pod *v1.Pod, vol *v1.Volume) (*claimSource, error) {
	name, isEphemeral := claimName(pod, vol)
	wrap := func(err error) error {
		return fmt.Errorf("error processing PVC %s/%s: %w", pod.Namespace, name, err)
	}
	pvc, err := m.cfg.Objects.GetPersistentVolumeClaim(ctx, pod.Namespace, name)
	if err != nil || pvc == nil {
		return nil, wrap(fmt.Errorf("failed to fetch PVC from API server: %v", err))
	}
	if pvc.DeletionTimestamp != nil && !slices.Contains(pvc.Finalizers, pvcProtectionFinalizer) {
		return nil, wrap(errors.New("PVC is being deleted"))
	}
	if pvc.Status.Phase != v1.ClaimBound {
		return nil, wrap(errors.New("PVC is not bound"))
	}
	if pvc.Spec.VolumeName == "" {
		return nil, wrap(errors.New("PVC has empty pvc.Spec.VolumeName"))
	}
	if isEphemeral {
		if err := ephemeral.VolumeIsForPod(pod, pvc); err != nil {
			return nil, err
		}
	}
	pv, err := m.cfg.Objects.GetPersistentVolume(ctx, pvc.Spec.VolumeName)
	if err != nil || pv == nil {
		return nil, wrap(fmt.Errorf("failed to fetch PV %s from API server: %v", pvc.Spec.VolumeName, err))
	}
	if pv.Spec.ClaimRef == nil {
		return nil, wrap(fmt.Errorf("found PV object %s but it has a nil pv.Spec.ClaimRef indicating it is not yet bound to the claim", pv.Name))
	}
	if pv.Spec.ClaimRef.UID != pvc.UID {
		return nil, wrap(fmt.Errorf("found PV object %s but its pv.Spec.ClaimRef.UID %s does not point to claim.UID %s", pv.Name, pv.Spec.ClaimRef.UID, pvc.UID))
	}
	mode := v1.PersistentVolumeFilesystem
	if pv.Spec.VolumeMode != nil {
		mode = *pv.Spec.VolumeMode
	}
	mounts, devices := usesOf(pod, vol.Name)
	if mounts && mode != v1.PersistentVolumeFilesystem {
		return nil, fmt.Errorf("volume %s has volumeMode %s, but is specified in volumeMounts", vol.Name, mode)
	}
	if devices && mode != v1.PersistentVolumeBlock {
		return nil, fmt.Errorf("volume %s has volumeMode %s, but is specified in volumeDevices", vol.Name, mode)
	}
	readOnly := vol.PersistentVolumeClaim != nil && vol.PersistentVolumeClaim.ReadOnly
	return &claimSource{pvc: pvc, pv: pv, readOnly: readOnly}, nil
}

// usesOf reports whether any container of pod (init and sidecar
// containers included) mounts volume name, and whether any uses it as a
// device.
func usesOf(pod *v1.Pod, name string) (mounts, devices bool) {
	podutil.AllContainers(pod, func(c *v1.Container) bool {
		for _, x := range c.VolumeMounts {
			mounts = mounts || x.Name == name
		}
		for _, x := range c.VolumeDevices {
			devices = devices || x.Name == name
		}
		return true
	})
	return mounts, devices
}

// claims is the manager's memory of the pod volumes it resolved to claims.
type claims struct {
	// byPod: pod UID → pod volume name → resolution. Guarded by Manager.mu.
	byPod map[types.UID]map[string]*claimSource
}

func (m *Manager) claimOf(uid types.UID, volName string) (*claimSource, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.claims.byPod[uid][volName]
	return c, ok
}

func (m *Manager) rememberClaim(uid types.UID, volName string, c *claimSource) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.claims.byPod[uid] == nil {
		m.claims.byPod[uid] = map[string]*claimSource{}
	}
	m.claims.byPod[uid][volName] = c
}

func (m *Manager) forgetClaims(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.claims.byPod, uid)
}

// resolveClaims resolves the pod's claim volumes not resolved yet. An
// error is the kubelet's "Unable to attach or mount volumes" for every
// volume that could not be processed (one event, as the kubelet's
// WaitForAttachAndMount reports them); the others are resolved.
func (m *Manager) resolveClaims(ctx context.Context, pod *v1.Pod) error {
	var failed, msgs []string
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		if name, _ := claimName(pod, vol); name == "" {
			continue
		}
		if _, ok := m.claimOf(pod.UID, vol.Name); ok {
			continue
		}
		c, err := m.resolveClaim(ctx, pod, vol)
		if err != nil {
			failed = append(failed, vol.Name)
			msgs = append(msgs, err.Error())
			continue
		}
		m.rememberClaim(pod.UID, vol.Name, c)
	}
	if len(failed) == 0 {
		return nil
	}
	sort.Strings(failed)
	return fmt.Errorf("Unable to attach or mount volumes: unmounted volumes=%v, unattached volumes=[], failed to process volumes=%v: %s",
		failed, failed, strings.Join(msgs, "; "))
}
