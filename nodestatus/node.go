package nodestatus

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/crivk/crivk/cri"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/nodedeclaredfeatures/features/inplacepodresize"
	"k8s.io/component-helpers/nodedeclaredfeatures/features/restartallcontainers"
	"k8s.io/utils/ptr"
)

// NodeConfig describes the node crivk registers.
type NodeConfig struct {
	Name           string
	InternalIP     string
	KubeletPort    int32
	MaxPods        int64
	RootDir        string // its filesystem gives ephemeral-storage
	AgentVersion   string // reported as kubeletVersion, e.g. v1.37.2-crivk.0
	RuntimeVersion cri.VersionInfo
	Labels         map[string]string
	// Taints are set when the Node is created (--register-with-taints).
	Taints []v1.Taint
	// Reservations are taken off the capacity for the allocatable.
	Reservations Reservations
	// Portion is the node's part of the machine among the nodes of one
	// crivk process (--node-count, --node-shares, docs/scale.md):
	// capacity and allocatable are that part of the machine's, the
	// reservations taken once before the split. The zero Portion: the
	// whole machine.
	Portion Portion
}

// DeclaredFeatures are the node's status.declaredFeatures
// (NodeDeclaredFeatures, GA and locked on in v1.37): the features of the
// kubelet's registry (component-helpers' nodedeclaredfeatures) that crivk
// implements, sorted, as the API server's validation wants them. The API
// server's NodeDeclaredFeatureValidator refuses a pod update that needs a
// feature its node does not declare: without
// InPlacePodLevelResourcesVerticalScaling, every pod-level in-place resize
// of a pod on the node. The scheduler's NodeDeclaredFeatures filter places
// a pod that needs one only on a node that declares it: without
// RestartAllContainersOnContainerExits, no pod with a RestartAllContainers
// rule. A feature is added here only once crivk does what it promises
// (docs/kubelet-1.37.md; the in-place restart: cri/restartall.go).
var DeclaredFeatures = []string{
	inplacepodresize.IPPRPodLevelResourcesFeatureGate,
	restartallcontainers.RestartAllContainersOnContainerExits,
}

// BuildNode returns the Node object crivk registers, with capacity read from
// the machine and conditions from the runtime's readiness rd.
func BuildNode(cfg NodeConfig, rd cri.Readiness, now time.Time) (*v1.Node, error) {
	capacity, err := MachineCapacity()
	if err != nil {
		return nil, err
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(cfg.RootDir, &fs); err != nil {
		return nil, fmt.Errorf("statfs of root dir %s: %w", cfg.RootDir, err)
	}
	storage := int64(fs.Blocks) * int64(fs.Bsize)
	capacity[v1.ResourcePods] = *resource.NewQuantity(cfg.MaxPods, resource.DecimalSI)
	// DecimalSI as the kubelet's EphemeralStorageCapacityFromFsInfo since
	// v1.37 (#137652); the allocatable keeps the capacity's format.
	capacity[v1.ResourceEphemeralStorage] = *resource.NewQuantity(storage, resource.DecimalSI)
	labels := map[string]string{
		"kubernetes.io/hostname":  cfg.Name,
		"kubernetes.io/os":        runtime.GOOS,
		"kubernetes.io/arch":      runtime.GOARCH,
		"beta.kubernetes.io/os":   runtime.GOOS,
		"beta.kubernetes.io/arch": runtime.GOARCH,
		"node.crivk.io/agent":     "crivk",
	}
	for k, v := range cfg.Labels {
		labels[k] = v
	}
	uname := unix.Utsname{}
	_ = unix.Uname(&uname)
	n := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: cfg.Name, Labels: labels},
		Status: v1.NodeStatus{
			Capacity:    cfg.Portion.Of(capacity),
			Allocatable: cfg.Reservations.AllocatableOf(capacity, cfg.Portion),
			Addresses: []v1.NodeAddress{
				{Type: v1.NodeInternalIP, Address: cfg.InternalIP},
				{Type: v1.NodeHostName, Address: cfg.Name},
			},
			DaemonEndpoints: v1.NodeDaemonEndpoints{KubeletEndpoint: v1.DaemonEndpoint{Port: cfg.KubeletPort}},
			NodeInfo: v1.NodeSystemInfo{
				MachineID:       readTrim("/etc/machine-id"),
				SystemUUID:      readTrim("/sys/class/dmi/id/product_uuid"),
				BootID:          readTrim("/proc/sys/kernel/random/boot_id"),
				KernelVersion:   unix.ByteSliceToString(uname.Release[:]),
				OSImage:         osImage(),
				OperatingSystem: runtime.GOOS,
				Architecture:    runtime.GOARCH,
				KubeletVersion:  cfg.AgentVersion,
			},
		},
	}
	if cfg.RuntimeVersion.RuntimeName != "" { // unknown while the runtime is down
		n.Status.NodeInfo.ContainerRuntimeVersion = cfg.RuntimeVersion.RuntimeName + "://" + cfg.RuntimeVersion.RuntimeVersion
	}
	n.Status.Conditions = NodeConditions(nil, rd, nil, now)
	n.Spec.Taints = append([]v1.Taint(nil), cfg.Taints...)
	n.Status.Phase = v1.NodeRunning
	n.Status.DeclaredFeatures = append([]string(nil), DeclaredFeatures...)
	n.Status.RuntimeHandlers = RuntimeHandlers(rd.Handlers)
	return n, nil
}

// RuntimeHandlers is the Node's status.runtimeHandlers for the runtime's
// handlers, as the kubelet's RuntimeHandlers setter (RecursiveReadOnlyMounts
// and UserNamespacesSupport are both on): every handler, "" the default,
// with both features said, true or false. The node e2e suite reads the
// default handler's userNamespaces to decide whether its user namespace
// specs can run. nil when the runtime has not answered (the kubelet keeps
// what it last read; so does NodeProvider.check).
func RuntimeHandlers(hs []cri.RuntimeHandler) []v1.NodeRuntimeHandler {
	if hs == nil {
		return nil
	}
	out := make([]v1.NodeRuntimeHandler, len(hs))
	for i, h := range hs {
		out[i] = v1.NodeRuntimeHandler{
			Name: h.Name,
			Features: &v1.NodeRuntimeHandlerFeatures{
				RecursiveReadOnlyMounts: ptr.To(h.RecursiveReadOnlyMounts),
				UserNamespaces:          ptr.To(h.UserNamespaces),
			},
		}
	}
	return out
}

// MemoryCapacity is the machine's memory in bytes (MemTotal of
// /proc/meminfo), the node's memory capacity.
func MemoryCapacity() (int64, error) { return memTotal() }

// MachineCapacity is the machine's CPU (its logical CPUs) and memory
// (MemTotal), the base of the Node's capacity (BuildNode) and of the pod
// cgroup tree's bound (cmd's pod cgroups, Reservations.PodsBound): one
// reading of the machine for both.
func MachineCapacity() (v1.ResourceList, error) {
	mem, err := memTotal()
	if err != nil {
		return nil, fmt.Errorf("reading the machine's memory: %w", err)
	}
	return v1.ResourceList{
		v1.ResourceCPU:    *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
		v1.ResourceMemory: *resource.NewQuantity(mem, resource.BinarySI),
	}, nil
}

func memTotal() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parsing MemTotal in /proc/meminfo: %w", err)
			}
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("no MemTotal in /proc/meminfo")
}

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func osImage() string {
	for _, line := range strings.Split(readTrim("/etc/os-release"), "\n") {
		if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return runtime.GOOS
}
