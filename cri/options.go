package cri

import (
	"context"

	"github.com/crivk/crivk/credentialprovider"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// RunContainerOptions is what the caller adds to a container's CRI config
// beyond the pod spec: the kubelet's RuntimeHelper.GenerateRunContainerOptions.
// Everything that needs the Kubernetes API or the node's file system (volume
// mounts, resolved environment, the managed /etc/hosts, the termination
// message file) arrives here, so that this package never reads the API.
type RunContainerOptions struct {
	// Envs is the container's fully resolved environment, in order. When nil,
	// the literal values of the spec's env are used. Values are bytes: a
	// Secret's value that is not UTF-8 passes unchanged.
	Envs []*runtimeapi.KeyValue
	// Mounts are the container's mounts (volumes, /etc/hosts, termination
	// message file), in the order they are to be applied. A mount's
	// SelinuxRelabel says it asks for SELinux relabelling; SyncPod keeps it
	// only on a host with SELinux (selinux.go).
	Mounts []*runtimeapi.Mount
	// Devices, Annotations and CDIDevices are what device plugins add
	// (the kubelet's DeviceRunContainerOptions): host devices, container
	// annotations (the container's own keys win) and CDI device names.
	Devices     []*runtimeapi.Device
	Annotations map[string]string
	CDIDevices  []*runtimeapi.CDIDevice
	// MemoryCapacity is the node's memory in bytes, which a Burstable
	// container's OOM score is relative to; SyncPod sets it from
	// Config.MemoryCapacity.
	MemoryCapacity int64
	// Swap is the host's swap controller, which sets the container's
	// swap limit (swap.go); SyncPod sets it from Config.Swap.
	Swap SwapController
	// OOMKillGroup makes the container's cgroup an OOM group
	// (oomgroup.go); SyncPod sets it from Config.OOMKillGroup.
	OOMKillGroup bool
	// SeccompProfileRoot is where Localhost seccomp profiles are resolved
	// (<root-dir>/seccomp); SyncPod sets it from Config.SeccompProfileRoot.
	SeccompProfileRoot string
	// Node is written as the container's LabelNode when not empty; SyncPod
	// sets it from Config.Node.
	Node string
	// UserNamespace is the pod's user namespace, the sandbox's; SyncPod
	// sets it (userNamespace). nil: the runtime's default.
	UserNamespace *runtimeapi.UserNamespace
	// ImageUser is the user the container's image runs as (CRI
	// ImageStatus), which SyncPod reads when runAsNonRoot must be checked
	// against it (no runAsUser). nil there: unknown, taken as root, as the
	// kubelet takes an image that names no user.
	ImageUser *ImageUser
}

// ImageUser is an image's configured user: a numeric UID, or a user name
// that cannot be checked without the image's files.
type ImageUser struct {
	UID      *int64
	Username string
}

// RuntimeHelper is what SyncPod needs of its caller to start a container.
// The lifecycle engine implements it.
type RuntimeHelper interface {
	// GenerateRunContainerOptions returns the options of container c of pod,
	// given the pod's IPs (known once the sandbox exists) and the images of
	// the image volumes c mounts, by volume name (the runtime's mounts of
	// them carry these specs). An error is the kubelet's
	// CreateContainerConfigError: the container is not created and the
	// error's text is the waiting message.
	GenerateRunContainerOptions(ctx context.Context, pod *v1.Pod, c *v1.Container, podIPs []string, imageVolumes ImageVolumes) (*RunContainerOptions, error)
	// PullSecrets returns the pod's imagePullSecrets that exist (missing
	// ones are skipped, as the kubelet does, after a warning).
	PullSecrets(ctx context.Context, pod *v1.Pod) []v1.Secret
}

// CredentialProviders are the node's image credential provider plugins as
// one node sees them (credentialprovider.Keyring): the credentials they
// give pod for an image's repository, in the order to try them, each with
// the service account it was given for, if any.
type CredentialProviders interface {
	Lookup(ctx context.Context, pod credentialprovider.Pod, repository string) []credentialprovider.Credential
}

var _ CredentialProviders = (*credentialprovider.Keyring)(nil)

// SetCredentialProviders installs the node's credential providers
// (--image-credential-provider-config), asked after the pod's pull
// secrets for every image a pod needs (image.go). It must be called before
// the first SyncPod; without it, the pull secrets are the only
// credentials.
func (r *Runtime) SetCredentialProviders(p CredentialProviders) { r.providers = p }

// SetRuntimeHelper installs the helper SyncPod asks for container options.
// It must be called before the first SyncPod; without one, containers get
// the spec's literal environment and no mounts.
func (r *Runtime) SetRuntimeHelper(h RuntimeHelper) { r.helper = h }
