package volume

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/types"
)

// CSI volumes: the kubelet's CSI plugin (pkg/volume/csi: csi_attacher's
// MountDevice/UnmountDevice, csi_mounter's SetUpAt/TearDownAt) for a
// PersistentVolume with spec.csi and for a CSI ephemeral inline volume
// (a pod volume with csi).
//
//	<RootDir>/plugins/kubernetes.io/csi/<driver>/<sha256 of handle>/globalmount   staging (NodeStageVolume)
//	<RootDir>/plugins/kubernetes.io/csi/<driver>/<sha256 of handle>/vol_data.json
//	<RootDir>/pods/<uid>/volumes/kubernetes.io~csi/<name>/mount                    target (NodePublishVolume)
//	<RootDir>/pods/<uid>/volumes/kubernetes.io~csi/<name>/vol_data.json
//
// The kubelet's paths and files: everything the tear-down needs is in the
// vol_data.json files, so a crivk restarted (or killed in the middle of a
// set-up) tears down from the disk what it set up before.
//
// Set-up, once per pod volume (a target already mounted is left alone):
//
//  1. the driver's CSIDriver object (none: a persistent volume gets the
//     defaults, an inline one is refused): the lifecycle mode must be
//     listed; a persistent volume of a driver that requires attachment
//     is refused, since crivk does not read VolumeAttachments (see Not
//     done); tokenRequests are refused;
//  2. a persistent volume of a driver with STAGE_UNSTAGE_VOLUME is staged
//     unless the staging path is a mount point;
//  3. NodePublishVolume on the target, with the kubelet's volume context
//     (podInfoOnMount adds the csi.storage.k8s.io/pod.* keys and
//     csi.storage.k8s.io/ephemeral) and secrets; a final error removes
//     the target's directory, an uncertain one (deadline, unavailable,
//     ...) keeps vol_data.json so that the tear-down unpublishes;
//  4. the fsGroup, applied by crivk as the kubelet's supportsFSGroup says
//     (CSIDriver fsGroupPolicy: File always, ReadWriteOnceWithFSType, the
//     default, with an fsType and a ReadWriteOnce volume, None never; a
//     driver with VOLUME_MOUNT_GROUP gets it in the call instead).
//
// Tear-down (UnmountPod, before anything else of the pod's directory):
// NodeUnpublishVolume of each target, its directory removed, then, for a
// persistent volume that no other pod of the node publishes any more,
// NodeUnstageVolume and the staging directories removed. A driver that is
// not registered, or fails, fails UnmountPod: the pod's object is not
// deleted until it is done (the engine's deletion rule). CleanupOrphans
// also unstages staged volumes no pod publishes (a kill between unpublish
// and unstage).
//
// Not done (the kubelet does): VolumeAttachments and the Node's
// volumesInUse (drivers with attachRequired are refused), service account
// tokens for drivers (tokenRequests, requiresRepublish), raw block
// volumes, SELinux mount contexts, NodeGetVolumeStats in the summary,
// NodeExpandVolume.

const (
	pluginCSI = "kubernetes.io~csi"
	// csiPluginDir is the CSI plugin's directory under <RootDir>/plugins.
	csiPluginDir      = "kubernetes.io/csi"
	csiGlobalMount    = "globalmount"
	csiVolDataFile    = "vol_data.json"
	csiTargetDir      = "mount"
	csiEphemeralKey   = "csi.storage.k8s.io/ephemeral"
	lifecyclePersist  = string(storagev1.VolumeLifecyclePersistent)
	lifecycleInline   = string(storagev1.VolumeLifecycleEphemeral)
	csiDriverNotFound = "driver name %s not found in the list of registered CSI drivers"
)

// CSI is the manager's access to the node's CSI drivers; package csi's
// Drivers implements it and internal/nodeagent hands it in. nil: no CSI
// driver can register on this node (a node of many).
type CSI interface {
	// NodeClient returns the Node service of the registered driver name
	// and the function that closes its connection. A driver not
	// registered is an error with the kubelet's words ("driver name X not
	// found in the list of registered CSI drivers").
	NodeClient(name string) (csipb.NodeClient, func(), error)
	// CSIDriver returns the cluster's CSIDriver of name; nil and no error
	// when there is none.
	CSIDriver(ctx context.Context, name string) (*storagev1.CSIDriver, error)
}

// csiVolData is a vol_data.json: the kubelet's keys.
type csiVolData struct {
	SpecVolID           string `json:"specVolID,omitempty"`
	VolumeHandle        string `json:"volumeHandle"`
	DriverName          string `json:"driverName"`
	NodeName            string `json:"nodeName,omitempty"`
	VolumeLifecycleMode string `json:"volumeLifecycleMode,omitempty"`
}

// csiSource is what the set-up of one CSI volume needs.
type csiSource struct {
	driver, handle, mode, fsType string
	attrs                        map[string]string
	readOnly                     bool
	accessMode                   v1.PersistentVolumeAccessMode
	accessModes                  []v1.PersistentVolumeAccessMode // the PV's; nil inline
	mountOptions                 []string
	publishSecret, stageSecret   *v1.SecretReference
}

func csiSourceOf(pod *v1.Pod, vol *v1.Volume, t target) (*csiSource, error) {
	if t.claim != nil {
		pv := t.claim.pv
		src := pv.Spec.CSI
		s := &csiSource{driver: src.Driver, handle: src.VolumeHandle, mode: lifecyclePersist, fsType: src.FSType,
			attrs: src.VolumeAttributes, readOnly: t.claim.readOnly || src.ReadOnly, accessMode: v1.ReadWriteOnce,
			accessModes: pv.Spec.AccessModes, mountOptions: pv.Spec.MountOptions,
			publishSecret: src.NodePublishSecretRef, stageSecret: src.NodeStageSecretRef}
		if len(pv.Spec.AccessModes) > 0 {
			s.accessMode = pv.Spec.AccessModes[0]
		}
		if s.handle == "" {
			return nil, errors.New("makeDeviceMountPath failed, CSIPersistentVolumeSource volume handle is empty")
		}
		return s, nil
	}
	src := vol.CSI
	s := &csiSource{driver: src.Driver, handle: csiInlineHandle(pod.UID, vol.Name), mode: lifecycleInline,
		attrs: src.VolumeAttributes, accessMode: v1.ReadWriteOnce}
	if src.FSType != nil {
		s.fsType = *src.FSType
	}
	if src.ReadOnly != nil {
		s.readOnly = *src.ReadOnly
	}
	if src.NodePublishSecretRef != nil {
		s.publishSecret = &v1.SecretReference{Name: src.NodePublishSecretRef.Name, Namespace: pod.Namespace}
	}
	return s, nil
}

// csiInlineHandle is the volume handle of an inline volume (the kubelet's
// makeVolumeHandle).
func csiInlineHandle(uid types.UID, volName string) string {
	return fmt.Sprintf("csi-%x", sha256.Sum256([]byte(string(uid)+volName)))
}

// csiStagingDir is the directory of a persistent volume's staging path
// and its vol_data.json (the kubelet's makeDeviceMountPath's parent).
func (m *Manager) csiStagingDir(driver, handle string) string {
	return filepath.Join(m.cfg.RootDir, "plugins", csiPluginDir, driver, fmt.Sprintf("%x", sha256.Sum256([]byte(handle))))
}

// csiErr is the kubelet's CSI plugin message prefix.
func csiErr(format string, args ...any) error {
	return fmt.Errorf("kubernetes.io/csi: "+format, args...)
}

// setUpCSI stages and publishes the CSI volume of vol on dir/mount.
func (m *Manager) setUpCSI(ctx context.Context, pod *v1.Pod, vol *v1.Volume, t target, dir string) (ready bool, err error) {
	targetPath := filepath.Join(dir, csiTargetDir)
	if mounted, err := m.cfg.Mounter.IsMountPoint(targetPath); err != nil {
		return false, err
	} else if mounted {
		return true, nil
	}
	src, err := csiSourceOf(pod, vol, t)
	if err != nil {
		return false, err
	}
	if m.cfg.CSI == nil {
		return false, csiErr("mounter.SetUpAt failed to get CSI client: "+csiDriverNotFound, src.driver)
	}
	drv, err := m.cfg.CSI.CSIDriver(ctx, src.driver)
	if err != nil {
		return false, csiErr("mounter.SetupAt failed to check volume lifecycle mode: %v", err)
	}
	if err := checkCSIDriver(drv, src); err != nil {
		return false, err
	}
	client, closeConn, err := m.cfg.CSI.NodeClient(src.driver)
	if err != nil {
		return false, csiErr("mounter.SetUpAt failed to get CSI client: %v", err)
	}
	defer closeConn()
	caps, err := nodeCapabilities(ctx, client)
	if err != nil {
		return false, csiErr("mounter.SetUpAt failed to check for STAGE_UNSTAGE_VOLUME capability: %v", err)
	}
	capability := csiCapability(src, caps)
	if caps[csipb.NodeServiceCapability_RPC_VOLUME_MOUNT_GROUP] {
		if gid := fsGroup(pod); gid != nil {
			capability.GetMount().VolumeMountGroup = strconv.FormatInt(*gid, 10)
		}
	}

	m.csiMu.Lock()
	defer m.csiMu.Unlock()
	stagingPath := ""
	if src.mode == lifecyclePersist && caps[csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME] {
		stagingPath = filepath.Join(m.csiStagingDir(src.driver, src.handle), csiGlobalMount)
		if err := m.stageCSI(ctx, client, t.name, src, capability, stagingPath); err != nil {
			return false, err
		}
	}
	secrets, err := m.csiSecrets(ctx, src.publishSecret)
	if err != nil {
		return false, fmt.Errorf("fetching NodePublishSecretRef %s/%s failed: %v", src.publishSecret.Namespace, src.publishSecret.Name, err)
	}
	attrs := publishContext(pod, drv, src)
	if err := m.savePublishData(dir, t.name, src); err != nil {
		return false, err
	}
	_, err = client.NodePublishVolume(ctx, &csipb.NodePublishVolumeRequest{
		VolumeId:          src.handle,
		StagingTargetPath: stagingPath,
		TargetPath:        targetPath,
		VolumeCapability:  capability,
		Readonly:          src.readOnly,
		Secrets:           secrets,
		VolumeContext:     attrs,
	})
	if err != nil {
		if finalCSIError(err) {
			// Nothing was published: nothing to tear down.
			os.Remove(targetPath)
			os.Remove(filepath.Join(dir, csiVolDataFile))
			os.Remove(dir)
		}
		return false, err
	}
	log.G(ctx).WithField("pod", pod.Namespace+"/"+pod.Name).WithField("uid", pod.UID).
		WithField("volume", t.name).WithField("driver", src.driver).Info("CSI volume published")
	if caps[csipb.NodeServiceCapability_RPC_VOLUME_MOUNT_GROUP] {
		return false, nil // the driver applied the fsGroup
	}
	return false, applyCSIFSGroup(pod, drv, src, targetPath)
}

// savePublishData makes the volume's directory dir and its vol_data.json,
// what the tear-down reads, before the publish (the kubelet's SetUpAt).
func (m *Manager) savePublishData(dir, name string, src *csiSource) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return csiErr("mounter.SetUpAt failed to create dir %#v:  %v", dir, err)
	}
	if err := writeVolData(dir, csiVolData{SpecVolID: name, VolumeHandle: src.handle, DriverName: src.driver,
		NodeName: m.cfg.NodeName, VolumeLifecycleMode: src.mode}); err != nil {
		return csiErr("mounter.SetUpAt failed to save volume info data: %v", err)
	}
	return nil
}

// publishContext is NodePublishVolume's volume context: the source's
// attributes, with the pod's information when the CSIDriver asks for it
// (podInfoOnMount) and the ephemeral key of an inline volume (the kubelet
// sets it with or without podInfoOnMount).
func publishContext(pod *v1.Pod, drv *storagev1.CSIDriver, src *csiSource) map[string]string {
	attrs := maps.Clone(src.attrs)
	if attrs == nil {
		attrs = map[string]string{}
	}
	if drv != nil && drv.Spec.PodInfoOnMount != nil && *drv.Spec.PodInfoOnMount {
		attrs["csi.storage.k8s.io/pod.name"] = pod.Name
		attrs["csi.storage.k8s.io/pod.namespace"] = pod.Namespace
		attrs["csi.storage.k8s.io/pod.uid"] = string(pod.UID)
		attrs["csi.storage.k8s.io/serviceAccount.name"] = pod.Spec.ServiceAccountName
		attrs[csiEphemeralKey] = strconv.FormatBool(src.mode == lifecycleInline)
	}
	if src.mode == lifecycleInline {
		attrs[csiEphemeralKey] = "true"
	}
	return attrs
}

// applyCSIFSGroup gives the published volume at targetPath the pod's
// fsGroup when the kubelet's rule says crivk applies it (supportsFSGroup),
// by the pod's fsGroupChangePolicy.
func applyCSIFSGroup(pod *v1.Pod, drv *storagev1.CSIDriver, src *csiSource, targetPath string) error {
	gid := fsGroup(pod)
	if !supportsFSGroup(drv, src, gid) || !ownershipNeeded(targetPath, *gid, pod.Spec.SecurityContext.FSGroupChangePolicy) {
		return nil
	}
	if err := setVolumeOwnership(targetPath, gid, false); err != nil {
		return fmt.Errorf("applyFSGroup failed for vol %s: %v", src.handle, err)
	}
	return nil
}

// checkCSIDriver applies the CSIDriver's rules to src (the kubelet's
// supportsVolumeLifecycleMode, and what crivk does not do).
func checkCSIDriver(drv *storagev1.CSIDriver, src *csiSource) error {
	mode := storagev1.VolumeLifecycleMode(src.mode)
	switch {
	case drv == nil && src.mode == lifecyclePersist:
	case drv == nil:
		return csiErr("mounter.SetupAt failed to check volume lifecycle mode: volume mode %q not supported by driver %s (no CSIDriver object)", mode, src.driver)
	case !slices.Contains(drv.Spec.VolumeLifecycleModes, mode) &&
		!(len(drv.Spec.VolumeLifecycleModes) == 0 && src.mode == lifecyclePersist):
		return csiErr("mounter.SetupAt failed to check volume lifecycle mode: volume mode %q not supported by driver %s (only supports %q)", mode, src.driver, drv.Spec.VolumeLifecycleModes)
	}
	if src.mode == lifecyclePersist && (drv == nil || drv.Spec.AttachRequired == nil || *drv.Spec.AttachRequired) {
		return csiErr("mounter.SetUpAt failed to fetch publishContext: driver %s requires attachment (its CSIDriver's attachRequired is not false, or it has no CSIDriver), and crivk does not wait for VolumeAttachments", src.driver)
	}
	if drv != nil && len(drv.Spec.TokenRequests) > 0 {
		return csiErr("mounter.SetUpAt failed to get service accoount token attributes: CSIDriver %s asks for service account tokens (tokenRequests), which crivk does not supply", src.driver)
	}
	return nil
}

// supportsFSGroup is the kubelet's rule for crivk applying the fsGroup to
// a CSI volume.
func supportsFSGroup(drv *storagev1.CSIDriver, src *csiSource, gid *int64) bool {
	policy := storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy
	if drv != nil && drv.Spec.FSGroupPolicy != nil {
		policy = *drv.Spec.FSGroupPolicy
	}
	switch {
	case gid == nil || policy == storagev1.NoneFSGroupPolicy || src.readOnly:
		return false
	case policy == storagev1.FileFSGroupPolicy:
		return true
	case src.fsType == "":
		return false
	case src.mode == lifecycleInline:
		return true
	}
	return slices.Contains(src.accessModes, v1.ReadWriteOnce)
}

func nodeCapabilities(ctx context.Context, client csipb.NodeClient) (map[csipb.NodeServiceCapability_RPC_Type]bool, error) {
	res, err := client.NodeGetCapabilities(ctx, &csipb.NodeGetCapabilitiesRequest{})
	if err != nil {
		return nil, err
	}
	caps := map[csipb.NodeServiceCapability_RPC_Type]bool{}
	for _, c := range res.GetCapabilities() {
		if rpc := c.GetRpc(); rpc != nil {
			caps[rpc.GetType()] = true
		}
	}
	return caps, nil
}

// csiCapability is the volume capability of src (the kubelet's
// asCSIAccessModeV1 and its mount capability).
func csiCapability(src *csiSource, caps map[csipb.NodeServiceCapability_RPC_Type]bool) *csipb.VolumeCapability {
	multi := caps[csipb.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER]
	mode := csipb.VolumeCapability_AccessMode_UNKNOWN
	switch src.accessMode {
	case v1.ReadWriteOnce:
		mode = csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
		if multi {
			mode = csipb.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER
		}
	case v1.ReadOnlyMany:
		mode = csipb.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
	case v1.ReadWriteMany:
		mode = csipb.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER
	case v1.ReadWriteOncePod:
		mode = csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
		if multi {
			mode = csipb.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER
		}
	}
	return &csipb.VolumeCapability{
		AccessType: &csipb.VolumeCapability_Mount{Mount: &csipb.VolumeCapability_MountVolume{
			FsType: src.fsType, MountFlags: src.mountOptions}},
		AccessMode: &csipb.VolumeCapability_AccessMode{Mode: mode},
	}
}

// stageCSI stages src on stagingPath unless it is mounted there. Called
// with csiMu held.
func (m *Manager) stageCSI(ctx context.Context, client csipb.NodeClient, name string, src *csiSource, capability *csipb.VolumeCapability, stagingPath string) error {
	if mounted, err := m.cfg.Mounter.IsMountPoint(stagingPath); err != nil {
		return err
	} else if mounted {
		return nil
	}
	dataDir := filepath.Dir(stagingPath)
	if err := os.MkdirAll(stagingPath, 0o750); err != nil {
		return csiErr("attacher.MountDevice failed to create dir %#v:  %v", stagingPath, err)
	}
	if err := writeVolData(dataDir, csiVolData{VolumeHandle: src.handle, DriverName: src.driver}); err != nil {
		return csiErr("attacher.MountDevice failed to save volume info data: %v", err)
	}
	secrets, err := m.csiSecrets(ctx, src.stageSecret)
	if err != nil {
		return fmt.Errorf("fetching NodeStageSecretRef %s/%s failed: %v", src.stageSecret.Namespace, src.stageSecret.Name, err)
	}
	_, err = client.NodeStageVolume(ctx, &csipb.NodeStageVolumeRequest{
		VolumeId:          src.handle,
		StagingTargetPath: stagingPath,
		VolumeCapability:  capability,
		Secrets:           secrets,
		VolumeContext:     src.attrs,
	})
	if err != nil {
		if finalCSIError(err) {
			os.Remove(stagingPath)
			os.Remove(filepath.Join(dataDir, csiVolDataFile))
			os.Remove(dataDir)
		}
		return &mountDeviceError{volume: name, err: err}
	}
	return nil
}

// mountDeviceError is a failed NodeStageVolume: the kubelet reports it as
// its own step, "MountVolume.MountDevice failed", not under SetUp.
type mountDeviceError struct {
	volume string
	err    error
}

func (e *mountDeviceError) Error() string {
	return fmt.Sprintf("MountVolume.MountDevice failed for volume %q : %v", e.volume, e.err)
}

func (e *mountDeviceError) Unwrap() error { return e.err }

// csiSecrets reads a secret's data as strings (the kubelet's
// getCredentialsFromSecret); nil ref: none.
func (m *Manager) csiSecrets(ctx context.Context, ref *v1.SecretReference) (map[string]string, error) {
	if ref == nil {
		return nil, nil
	}
	s, err := m.cfg.Objects.GetSecret(ctx, ref.Namespace, ref.Name)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(s.Data))
	for k, v := range s.Data {
		out[k] = string(v)
	}
	return out, nil
}

// finalCSIError reports whether a CSI call's error says the operation is
// over (nothing in progress on the driver's side): the kubelet's
// IsOperationFinishedError, whose uncertain codes are these.
func finalCSIError(err error) bool {
	st, ok := status.FromError(err)
	if !ok {
		return false
	}
	switch st.Code() {
	case codes.Canceled, codes.DeadlineExceeded, codes.Unavailable, codes.ResourceExhausted, codes.Aborted:
		return false
	}
	return true
}

func writeVolData(dir string, d csiVolData) error {
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, csiVolDataFile), b, 0o640)
}

func readVolData(dir string) (csiVolData, error) {
	var d csiVolData
	b, err := os.ReadFile(filepath.Join(dir, csiVolDataFile))
	if err != nil {
		return d, err
	}
	return d, json.Unmarshal(b, &d)
}

// tearDownCSI unpublishes every CSI volume of pod uid, removes its
// directory, and unstages the persistent ones no other pod publishes.
func (m *Manager) tearDownCSI(ctx context.Context, uid types.UID) error {
	root := filepath.Join(m.PodDir(uid), "volumes", pluginCSI)
	entries, err := os.ReadDir(root)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	m.csiMu.Lock()
	defer m.csiMu.Unlock()
	var errs []error
	for _, e := range entries {
		dir := filepath.Join(root, e.Name())
		if err := m.unpublishCSI(ctx, dir); err != nil {
			errs = append(errs, fmt.Errorf("UnmountVolume.TearDown failed for volume %q : %w", e.Name(), err))
		}
	}
	return errors.Join(errs...)
}

// unpublishCSI unpublishes the volume of dir (csiMu held) and removes
// dir; then unstages the volume if no pod publishes it any more.
func (m *Manager) unpublishCSI(ctx context.Context, dir string) error {
	targetPath := filepath.Join(dir, csiTargetDir)
	d, err := readVolData(dir)
	if os.IsNotExist(err) {
		// No vol_data.json: never published (or its removal was
		// interrupted); only a directory that is not a mount goes.
		if mounted, err := m.cfg.Mounter.IsMountPoint(targetPath); err != nil || mounted {
			return fmt.Errorf("%s is mounted but has no %s", targetPath, csiVolDataFile)
		}
		os.Remove(targetPath)
		return os.Remove(dir)
	}
	if err != nil {
		return fmt.Errorf("reading %s: %w", filepath.Join(dir, csiVolDataFile), err)
	}
	if m.cfg.CSI == nil {
		return csiErr("Unmounter.TearDownAt failed to get CSI client: "+csiDriverNotFound, d.DriverName)
	}
	client, closeConn, err := m.cfg.CSI.NodeClient(d.DriverName)
	if err != nil {
		return csiErr("Unmounter.TearDownAt failed to get CSI client: %v", err)
	}
	defer closeConn()
	if _, err := client.NodeUnpublishVolume(ctx, &csipb.NodeUnpublishVolumeRequest{VolumeId: d.VolumeHandle, TargetPath: targetPath}); err != nil {
		return csiErr("Unmounter.TearDownAt failed: %v", err)
	}
	if mounted, err := m.cfg.Mounter.IsMountPoint(targetPath); err != nil {
		return err
	} else if mounted {
		return fmt.Errorf("%s is still mounted after NodeUnpublishVolume", targetPath)
	}
	if err := os.Remove(targetPath); err != nil && !os.IsNotExist(err) {
		return err
	}
	if err := os.Remove(filepath.Join(dir, csiVolDataFile)); err != nil {
		return err
	}
	if err := os.Remove(dir); err != nil {
		return err
	}
	if d.VolumeLifecycleMode == lifecycleInline {
		return nil
	}
	return m.unstageUnused(ctx, client, d.DriverName, d.VolumeHandle)
}

// unstageUnused unstages the persistent volume handle of driver when it is
// staged and no pod directory publishes it (csiMu held).
func (m *Manager) unstageUnused(ctx context.Context, client csipb.NodeClient, driver, handle string) error {
	dataDir := m.csiStagingDir(driver, handle)
	if _, err := readVolData(dataDir); os.IsNotExist(err) {
		return nil // not staged (a driver without STAGE_UNSTAGE_VOLUME)
	}
	if used, err := m.csiPublished(driver, handle); err != nil || used {
		return err
	}
	stagingPath := filepath.Join(dataDir, csiGlobalMount)
	if _, err := client.NodeUnstageVolume(ctx, &csipb.NodeUnstageVolumeRequest{VolumeId: handle, StagingTargetPath: stagingPath}); err != nil {
		return csiErr("attacher.UnmountDevice failed: %v", err)
	}
	if mounted, err := m.cfg.Mounter.IsMountPoint(stagingPath); err != nil {
		return err
	} else if mounted {
		return fmt.Errorf("%s is still mounted after NodeUnstageVolume", stagingPath)
	}
	os.Remove(stagingPath)
	os.Remove(filepath.Join(dataDir, csiVolDataFile))
	return os.Remove(dataDir)
}

// csiPublished reports whether any pod directory holds a publication of
// the persistent volume handle of driver.
func (m *Manager) csiPublished(driver, handle string) (bool, error) {
	dirs, err := filepath.Glob(filepath.Join(m.cfg.RootDir, "pods", "*", "volumes", pluginCSI, "*"))
	if err != nil {
		return false, err
	}
	for _, dir := range dirs {
		d, err := readVolData(dir)
		if err == nil && d.DriverName == driver && d.VolumeHandle == handle && d.VolumeLifecycleMode != lifecycleInline {
			return true, nil
		}
	}
	return false, nil
}

// cleanupStaging unstages the staged volumes no pod publishes (a crivk
// killed between a pod's unpublish and the unstage).
func (m *Manager) cleanupStaging(ctx context.Context) error {
	dataDirs, err := filepath.Glob(filepath.Join(m.cfg.RootDir, "plugins", csiPluginDir, "*", "*"))
	if err != nil || len(dataDirs) == 0 || m.cfg.CSI == nil {
		return err
	}
	m.csiMu.Lock()
	defer m.csiMu.Unlock()
	var errs []error
	for _, dataDir := range dataDirs {
		d, err := readVolData(dataDir)
		if err != nil {
			continue
		}
		if used, err := m.csiPublished(d.DriverName, d.VolumeHandle); err != nil || used {
			continue
		}
		client, closeConn, err := m.cfg.CSI.NodeClient(d.DriverName)
		if err != nil {
			// The driver is not (yet) registered: the next
			// housekeeping tries again; no pod waits for this.
			continue
		}
		if err := m.unstageUnused(ctx, client, d.DriverName, d.VolumeHandle); err != nil {
			errs = append(errs, fmt.Errorf("unstaging volume %s of driver %s: %w", d.VolumeHandle, d.DriverName, err))
		}
		closeConn()
	}
	return errors.Join(errs...)
}
