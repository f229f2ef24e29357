package volume

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// Objects is the manager's read access to the API objects volumes
// reference; the provider implements it (lifecycle.Objects). Errors meaning
// "not found" satisfy apierrors.IsNotFound.
type Objects interface {
	GetConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error)
	GetSecret(ctx context.Context, namespace, name string) (*v1.Secret, error)
	RequestToken(ctx context.Context, namespace, serviceAccount string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error)
	// GetPersistentVolumeClaim and GetPersistentVolume read the claims of
	// the node's pods and the volumes bound to them (persistent.go).
	GetPersistentVolumeClaim(ctx context.Context, namespace, name string) (*v1.PersistentVolumeClaim, error)
	GetPersistentVolume(ctx context.Context, name string) (*v1.PersistentVolume, error)
}

// Config configures a Manager; New validates it and fills defaults.
type Config struct {
	// RootDir is crivk's state directory; pod directories live under
	// <RootDir>/pods.
	RootDir string
	Objects Objects
	Clock   clock.Clock
	// NodeAllocatable returns the node's allocatable resources: the
	// downward API's value of a resource limit a container does not set.
	NodeAllocatable func() v1.ResourceList
	// Mounter mounts and unmounts tmpfs; nil: the host's (mount(2)).
	Mounter Mounter
	// CSI reaches the node's CSI drivers (csi.go); nil: none can
	// register here, and a CSI volume fails to set up.
	CSI CSI
	// NodeName is written in the CSI volumes' vol_data.json.
	NodeName string
}

// Mounter is the manager's access to mount(2); tests use a fake.
type Mounter interface {
	MountTmpfs(dir string, sizeBytes int64) error
	// Bind bind-mounts src on dir, read-only when readOnly.
	Bind(src, dir string, readOnly bool) error
	Unmount(dir string) error
	// MountPoints returns the mount points at or below dir.
	MountPoints(dir string) ([]string, error)
	IsMountPoint(dir string) (bool, error)
}

// Manager implements lifecycle.Volumes. Safe for concurrent use; the work
// of one pod is serialised by its lock.
type Manager struct {
	cfg    Config
	tokens *tokenCache

	mu sync.Mutex
	// podLocks serialises MountPod/UnmountPod of one pod. Guarded by mu.
	podLocks map[types.UID]*sync.Mutex
	// claims are the pod volumes resolved to persistent volumes
	// (persistent.go). Guarded by mu.
	claims claims
	// csiMu serialises the CSI stage, publish, unpublish and unstage
	// calls of all pods: a volume is unstaged only when no pod directory
	// publishes it, which a concurrent publish must not change (csi.go).
	csiMu sync.Mutex
}

// New returns a manager over cfg.
func New(cfg Config) (*Manager, error) {
	if cfg.RootDir == "" || !filepath.IsAbs(cfg.RootDir) {
		return nil, fmt.Errorf("volume: root dir %q must be an absolute path", cfg.RootDir)
	}
	if cfg.Objects == nil {
		return nil, errors.New("volume: no Objects")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.NodeAllocatable == nil {
		cfg.NodeAllocatable = func() v1.ResourceList { return nil }
	}
	if cfg.Mounter == nil {
		cfg.Mounter = hostMounter{}
	}
	return &Manager{
		cfg:      cfg,
		tokens:   newTokenCache(cfg.Objects, cfg.Clock),
		podLocks: map[types.UID]*sync.Mutex{},
		claims:   claims{byPod: map[types.UID]map[string]*claimSource{}},
	}, nil
}

func (m *Manager) lock(uid types.UID) func() {
	m.mu.Lock()
	l, ok := m.podLocks[uid]
	if !ok {
		l = &sync.Mutex{}
		m.podLocks[uid] = l
	}
	m.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// Plugin directory names, the kubelet's (escaped "kubernetes.io/...").
const (
	pluginEmptyDir    = "kubernetes.io~empty-dir"
	pluginConfigMap   = "kubernetes.io~configmap"
	pluginSecret      = "kubernetes.io~secret"
	pluginDownwardAPI = "kubernetes.io~downward-api"
	pluginProjected   = "kubernetes.io~projected"
	// pluginLocal is the kubelet's local plugin: a local PersistentVolume
	// bound to a claim of the pod (local.go).
	pluginLocal = "kubernetes.io~local-volume"
	// pluginImage is the kubelet's image plugin (pkg/volume/image), a stub
	// with no directory: the runtime mounts the image (Mounts).
	pluginImage = "kubernetes.io~image"
)

// PodDir is the directory of pod uid.
func (m *Manager) PodDir(uid types.UID) string {
	return filepath.Join(m.cfg.RootDir, "pods", string(uid))
}

func (m *Manager) volumeDir(uid types.UID, plugin, name string) string {
	return filepath.Join(m.PodDir(uid), "volumes", plugin, name)
}

// target is where a pod volume lives on the node: the plugin that sets it
// up and the name of its directory under the plugin's.
type target struct {
	// plugin is the plugin's directory name; "" for a hostPath volume
	// (the host path itself is bound), pluginImage for an image volume
	// (no directory either).
	plugin string
	// name is the directory's name: the pod volume's, the
	// PersistentVolume's for a claim (the kubelet's volume.Spec.Name()).
	name string
	// claim is the claim and volume behind a persistentVolumeClaim or
	// ephemeral volume; nil for the others.
	claim *claimSource
	// readOnly: every mount of the volume is read-only (a claim's or a
	// CSI source's readOnly).
	readOnly bool
}

// errUnsupported is the error of a volume type crivk cannot set up.
var errUnsupported = errors.New("volume type is not supported by crivk")

// targetOf returns the target of vol, or an error for unsupported types
// and for a claim volume not resolved yet (MountPod resolves them).
func (m *Manager) targetOf(pod *v1.Pod, vol *v1.Volume) (target, error) {
	t := target{name: vol.Name}
	switch {
	case vol.EmptyDir != nil:
		t.plugin = pluginEmptyDir
	case vol.ConfigMap != nil:
		t.plugin = pluginConfigMap
	case vol.Secret != nil:
		t.plugin = pluginSecret
	case vol.DownwardAPI != nil:
		t.plugin = pluginDownwardAPI
	case vol.Projected != nil:
		t.plugin = pluginProjected
	case vol.HostPath != nil:
	case vol.Image != nil:
		t.plugin = pluginImage
	case vol.CSI != nil:
		t.plugin = pluginCSI
		t.readOnly = vol.CSI.ReadOnly != nil && *vol.CSI.ReadOnly
	case vol.PersistentVolumeClaim != nil, vol.Ephemeral != nil:
		c, ok := m.claimOf(pod.UID, vol.Name)
		if !ok {
			return t, fmt.Errorf("the claim of volume %q is not resolved yet", vol.Name)
		}
		t.claim, t.name, t.readOnly = c, c.pv.Name, c.readOnly
		if m := c.pv.Spec.VolumeMode; m != nil && *m == v1.PersistentVolumeBlock {
			return t, fmt.Errorf("persistent volume %s has volumeMode Block: raw block volumes (volumeDevices) are not supported by crivk", c.pv.Name)
		}
		switch {
		case c.pv.Spec.Local != nil:
			t.plugin = pluginLocal
		case c.pv.Spec.CSI != nil:
			t.plugin = pluginCSI
			t.readOnly = t.readOnly || c.pv.Spec.CSI.ReadOnly
		default:
			return t, fmt.Errorf("persistent volume %s: %w", c.pv.Name, errUnsupported)
		}
	default:
		return t, errUnsupported
	}
	return t, nil
}

// MountPod sets up every volume of pod, or refreshes it when set up
// already. The error joins one error per volume that could not be set up.
func (m *Manager) MountPod(ctx context.Context, pod *v1.Pod) error {
	defer m.lock(pod.UID)()
	var errs []error
	if err := m.resolveClaims(ctx, pod); err != nil {
		errs = append(errs, err)
	}
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		if name, _ := claimName(pod, vol); name != "" {
			if _, ok := m.claimOf(pod.UID, vol.Name); !ok {
				continue // its resolution failed: reported above
			}
		}
		t, err := m.targetOf(pod, vol)
		if err != nil {
			errs = append(errs, fmt.Errorf("MountVolume.SetUp failed for volume %q : %w", t.name, err))
			continue
		}
		ready, err := m.setUp(ctx, pod, vol, t)
		if err == nil {
			continue
		}
		if ready {
			// The kubelet keeps a volume that was set up as it is when a
			// refresh fails; containers keep their data.
			log.G(ctx).WithError(err).WithField("pod", pod.Namespace+"/"+pod.Name).WithField("uid", pod.UID).
				WithField("volume", vol.Name).Warn("refreshing volume failed; keeping its current content")
			continue
		}
		if de := (*mountDeviceError)(nil); errors.As(err, &de) {
			errs = append(errs, de)
			continue
		}
		errs = append(errs, fmt.Errorf("MountVolume.SetUp failed for volume %q : %w", t.name, err))
	}
	return errors.Join(errs...)
}

// setUp sets up or refreshes vol; ready reports whether the volume was set
// up before (then an error leaves it usable).
func (m *Manager) setUp(ctx context.Context, pod *v1.Pod, vol *v1.Volume, t target) (ready bool, err error) {
	plugin := t.plugin
	switch plugin {
	case "":
		return false, checkHostPath(vol.HostPath)
	case pluginImage:
		// Nothing on the node: the runtime manager makes the image
		// available and the runtime mounts it (the kubelet's image
		// plugin's SetUp does nothing).
		return false, nil
	}
	dir := m.volumeDir(pod.UID, plugin, t.name)
	switch plugin {
	case pluginEmptyDir:
		return false, m.setUpEmptyDir(dir, vol.EmptyDir, fsGroup(pod))
	case pluginLocal:
		return m.setUpLocal(ctx, pod, t, dir)
	case pluginCSI:
		return m.setUpCSI(ctx, pod, vol, t, dir)
	}
	ready = fileExists(filepath.Join(dir, dataDirName))
	var payload map[string]FileProjection
	switch plugin {
	case pluginConfigMap:
		payload, err = m.configMapPayload(ctx, pod, vol.ConfigMap)
	case pluginSecret:
		payload, err = m.secretPayload(ctx, pod, vol.Secret)
	case pluginDownwardAPI:
		payload, err = m.downwardAPIPayload(pod, vol.DownwardAPI)
	case pluginProjected:
		payload, err = m.projectedPayload(ctx, pod, vol.Projected)
	}
	if err != nil {
		return ready, err
	}
	// Secrets and tokens live in memory only, as with the kubelet.
	memory := plugin == pluginSecret || plugin == pluginProjected
	if _, err := m.makeDir(dir, memory, 0); err != nil {
		return ready, err
	}
	gid := fsGroup(pod)
	w := &atomicWriter{dir: dir, now: m.cfg.Clock.Now,
		setPerms: func() error { return setVolumeOwnership(dir, gid, true) }}
	if err := w.Write(payload); err != nil {
		return ready, fmt.Errorf("writing volume of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return ready, nil
}

// makeDir creates dir (mode 0777 like the kubelet's emptyDir, so that
// containers of any user can use it), mounting a tmpfs on it when memory.
// fresh reports whether it was created or mounted now.
func (m *Manager) makeDir(dir string, memory bool, sizeBytes int64) (fresh bool, err error) {
	fresh = !fileExists(dir)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return false, err
	}
	if memory {
		mounted, err := m.cfg.Mounter.IsMountPoint(dir)
		if err != nil {
			return false, err
		}
		if !mounted {
			if err := m.cfg.Mounter.MountTmpfs(dir, sizeBytes); err != nil {
				return false, fmt.Errorf("mounting tmpfs on %s: %w", dir, err)
			}
			fresh = true
		}
	}
	if !fresh {
		return false, nil // set up before: the containers may have changed it
	}
	return true, os.Chmod(dir, 0o777)
}

// VolumePath returns the host directory of pod's volume name, the
// kubelet's volumeutil.GetPath of its mounter. ok is false when the pod
// has no such volume or it is not set up on the node (the kubelet's "no
// mounter"): fileKeyRef environment variables read their file from there.
func (m *Manager) VolumePath(pod *v1.Pod, name string) (path string, ok bool) {
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		if vol.Name != name {
			continue
		}
		t, err := m.targetOf(pod, vol)
		if err != nil || t.plugin == pluginImage {
			// An image volume has no path on the node (the kubelet's
			// image plugin's GetPath is "").
			return "", false
		}
		if t.plugin == "" {
			return vol.HostPath.Path, true
		}
		dir := m.hostDir(pod.UID, t)
		return dir, fileExists(dir)
	}
	return "", false
}

// selinuxRelabel reports whether a volume of target t asks the runtime to
// relabel it for the container's SELinux context: the kubelet's
// GetAttributes().Managed && SELinuxRelabel. Its emptyDir, configMap,
// secret, downwardAPI and projected plugins do; hostPath ("") does not
// (neither managed nor relabelled: a host's files keep their label); its
// local plugin does unless the volume is read-only (Managed: !readOnly).
func selinuxRelabel(t target) bool {
	switch t.plugin {
	case pluginEmptyDir, pluginConfigMap, pluginSecret, pluginDownwardAPI, pluginProjected:
		return true
	case pluginLocal, pluginCSI:
		return !t.readOnly
	}
	return false
}

// hostDir is the directory containers of pod uid mount for a volume of
// target t (not hostPath, not image): the volume's directory, its "mount"
// below it for CSI (the publish target).
func (m *Manager) hostDir(uid types.UID, t target) string {
	dir := m.volumeDir(uid, t.plugin, t.name)
	if t.plugin == pluginCSI {
		dir = filepath.Join(dir, csiTargetDir)
	}
	return dir
}

// Mounts returns the CRI mounts of container c's volumeMounts; env is the
// container's resolved environment, for subPathExpr; images are the image
// specs of the image volumes c mounts, by volume name (the runtime
// manager's pulls, cri.ImageVolumes).
//
// A mount of an image volume is the kubelet's (makeMounts): no host path,
// the volume's image spec, the subPath (or expanded subPathExpr, relative
// and without "..") as ImageSubPath, which the runtime resolves inside the
// image, always read-only (the image plugin's ReadOnly attribute), never
// relabelled (neither Managed nor SELinuxRelabel). An image volume without
// a spec in images is an error: nothing is mounted in its place.
//
// A mount's SelinuxRelabel says the volume asks for relabelling (the
// kubelet's kubecontainer.Mount.SELinuxRelabel, selinuxRelabel); the
// runtime manager keeps it only on a host with SELinux (cri's
// Config.SELinuxEnabled, the kubelet's makeMounts in kuberuntime). It is set
// on every mount of such a volume, read-only, subPath and repeated mounts
// included: the kubelet's makeMounts marks the volume SELinuxLabeled on a
// copy of its VolumeMap entry, fresh for each container, so that mark
// never keeps a later mount from asking again.
func (m *Manager) Mounts(pod *v1.Pod, c *v1.Container, env map[string]string, images map[string]*runtimeapi.ImageSpec) ([]*runtimeapi.Mount, error) {
	vols := map[string]*v1.Volume{}
	for i := range pod.Spec.Volumes {
		vols[pod.Spec.Volumes[i].Name] = &pod.Spec.Volumes[i]
	}
	var out []*runtimeapi.Mount
	for _, vm := range c.VolumeMounts {
		vol, ok := vols[vm.Name]
		if !ok {
			return nil, fmt.Errorf("volume %q of volumeMount %q not found in the pod's volumes", vm.Name, vm.MountPath)
		}
		t, err := m.targetOf(pod, vol)
		if err != nil {
			return nil, fmt.Errorf("volume %q: %w", vol.Name, err)
		}
		plugin := t.plugin
		if plugin == pluginImage {
			im, err := imageMount(vm, c, env, images[vol.Name])
			if err != nil {
				return nil, err
			}
			out = append(out, im)
			continue
		}
		var base string
		readOnly := vm.ReadOnly
		if plugin == "" {
			base = vol.HostPath.Path
		} else {
			base = m.hostDir(pod.UID, t)
			switch {
			case plugin == pluginLocal, plugin == pluginCSI:
				// The claim's or source's readOnly makes every mount
				// read-only (the kubelet's makeMounts: mount.ReadOnly
				// || the volume's ReadOnly attribute).
				readOnly = readOnly || t.readOnly
			case plugin != pluginEmptyDir:
				// The kubelet mounts API-backed volumes read-only.
				readOnly = true
			}
		}
		host := base
		sub := vm.SubPath
		if vm.SubPathExpr != "" {
			sub, err = expandSubPath(vm.SubPathExpr, c, env)
			if err != nil {
				return nil, err
			}
		}
		if sub != "" {
			host, err = resolveSubPath(base, sub)
			if err != nil {
				return nil, fmt.Errorf("subPath %q of volume %q: %w", sub, vm.Name, err)
			}
		}
		prop, err := propagation(vm.MountPropagation, c)
		if err != nil {
			return nil, err
		}
		out = append(out, &runtimeapi.Mount{
			ContainerPath:  vm.MountPath,
			HostPath:       host,
			Readonly:       readOnly,
			SelinuxRelabel: selinuxRelabel(t),
			Propagation:    prop,
		})
	}
	return out, nil
}

// imageMount is the CRI mount of volumeMount vm of an image volume whose
// image is spec (Mounts).
func imageMount(vm v1.VolumeMount, c *v1.Container, env map[string]string, spec *runtimeapi.ImageSpec) (*runtimeapi.Mount, error) {
	if spec == nil {
		return nil, fmt.Errorf("the image of image volume %q is not on the node", vm.Name)
	}
	sub := vm.SubPath
	if vm.SubPathExpr != "" {
		var err error
		if sub, err = expandSubPath(vm.SubPathExpr, c, env); err != nil {
			return nil, err
		}
	}
	// The kubelet's checks and words (makeMounts); the runtime resolves
	// the rest inside the image (containerd: a directory, never outside).
	if filepath.IsAbs(sub) {
		return nil, fmt.Errorf("error SubPath `%s` must not be an absolute path", sub)
	}
	for _, part := range strings.Split(sub, "/") {
		if part == ".." {
			return nil, fmt.Errorf("unable to provision SubPath `%s`: must not contain '..'", sub)
		}
	}
	prop, err := propagation(vm.MountPropagation, c)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.Mount{
		ContainerPath: vm.MountPath,
		Image:         spec,
		ImageSubPath:  sub,
		Readonly:      true,
		Propagation:   prop,
	}, nil
}

func propagation(p *v1.MountPropagationMode, c *v1.Container) (runtimeapi.MountPropagation, error) {
	if p == nil {
		return runtimeapi.MountPropagation_PROPAGATION_PRIVATE, nil
	}
	switch *p {
	case v1.MountPropagationNone:
		return runtimeapi.MountPropagation_PROPAGATION_PRIVATE, nil
	case v1.MountPropagationHostToContainer:
		return runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER, nil
	case v1.MountPropagationBidirectional:
		if c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged {
			return 0, fmt.Errorf("bidirectional mount propagation is available only to privileged containers")
		}
		return runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL, nil
	}
	return 0, fmt.Errorf("invalid mount propagation mode %q", *p)
}

// UnmountPod unmounts everything below the pod's directory and removes it.
func (m *Manager) UnmountPod(ctx context.Context, pod *v1.Pod) error {
	unlock := m.lock(pod.UID)
	existed := fileExists(m.PodDir(pod.UID))
	// The CSI drivers unpublish their volumes first: the rest of the
	// directory is then unmounted blindly.
	err := m.tearDownCSI(ctx, pod.UID)
	if err == nil {
		err = m.removePodDir(pod.UID)
	}
	unlock()
	if existed && err == nil {
		log.G(ctx).WithField("pod", pod.Namespace+"/"+pod.Name).WithField("uid", pod.UID).Info("volumes and directory of the pod removed")
	}
	m.tokens.forget(pod.UID)
	if err != nil {
		// The claims stay resolved: the next try unmounts what is left.
		return fmt.Errorf("removing volumes of pod %s/%s (%s): %w", pod.Namespace, pod.Name, pod.UID, err)
	}
	m.forgetClaims(pod.UID)
	m.mu.Lock()
	delete(m.podLocks, pod.UID)
	m.mu.Unlock()
	return nil
}

// CleanupOrphans removes the directories of pods keep does not want (pods
// gone while crivk was down or whose removal failed).
func (m *Manager) CleanupOrphans(ctx context.Context, keep func(types.UID) bool) error {
	entries, err := os.ReadDir(filepath.Join(m.cfg.RootDir, "pods"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		uid := types.UID(e.Name())
		if !e.IsDir() || keep(uid) {
			continue
		}
		log.G(ctx).WithField("uid", uid).Info("removing the directory of an orphaned pod")
		if err := m.UnmountPod(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: uid}}); err != nil {
			errs = append(errs, fmt.Errorf("orphaned pod %s: %w", uid, err))
		}
	}
	if err := m.cleanupStaging(ctx); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// removePodDir unmounts every mount below the pod directory, deepest
// first, and removes the directory only when no mount is left (RemoveAll
// does not follow symlinks, so nothing outside is touched).
func (m *Manager) removePodDir(uid types.UID) error {
	dir := m.PodDir(uid)
	if _, err := os.Lstat(dir); os.IsNotExist(err) {
		return nil
	}
	mps, err := m.cfg.Mounter.MountPoints(dir)
	if err != nil {
		return err
	}
	// Deepest first.
	sort.Slice(mps, func(i, j int) bool { return strings.Count(mps[i], "/") > strings.Count(mps[j], "/") })
	for _, mp := range mps {
		if err := m.cfg.Mounter.Unmount(mp); err != nil {
			return fmt.Errorf("unmounting %s: %w", mp, err)
		}
	}
	if left, err := m.cfg.Mounter.MountPoints(dir); err != nil {
		return err
	} else if len(left) > 0 {
		return fmt.Errorf("mounts are left below %s: %v", dir, left)
	}
	return os.RemoveAll(dir)
}

func fileExists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}
