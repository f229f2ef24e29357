package csi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	storagev1client "k8s.io/client-go/kubernetes/typed/storage/v1"
	nodeutil "k8s.io/component-helpers/node/util"
)

// AnnotationNodeID is the Node annotation holding a JSON map of each
// registered driver's name to its node ID (the kubelet's
// annotationKeyNodeID).
const AnnotationNodeID = "csi.volume.kubernetes.io/nodeid"

// migratedPlugins are the in-tree volume plugins the kubelet v1.37
// reports migrated to CSI in the CSINode's
// storage.alpha.kubernetes.io/migrated-plugins annotation (all of its
// migratedPlugins are always on), sorted as the kubelet joins them.
var migratedPlugins = []string{
	"kubernetes.io/aws-ebs",
	"kubernetes.io/azure-disk",
	"kubernetes.io/azure-file",
	"kubernetes.io/cinder",
	"kubernetes.io/gce-pd",
	"kubernetes.io/portworx-volume",
	"kubernetes.io/vsphere-volume",
}

// The kubelet's back-offs (nodeinfomanager's updateBackoff, csi_plugin's
// initBackoff).
var (
	// updateBackoff: four tries, 10, 50 and 250ms apart.
	updateBackoff = wait.Backoff{Steps: 4, Duration: 10 * time.Millisecond, Factor: 5.0, Jitter: 0.1}
	// initBackoff: six tries of initialization, about 140s in all.
	initBackoff = wait.Backoff{Steps: 6, Duration: 30 * time.Millisecond, Factor: 8.0, Jitter: 0.1}
	// apiPollPeriod is how often InitializeCSINode asks whether the API
	// server answers.
	apiPollPeriod = time.Second
)

// nodeInfo writes the node's CSI information into its Node and CSINode
// (the kubelet's nodeInfoManager).
type nodeInfo struct {
	name     string
	nodes    corev1client.CoreV1Interface
	csiNodes storagev1client.CSINodesGetter

	// mu serialises every read-modify-write of the Node and the CSINode
	// (the kubelet's nim.lock).
	mu sync.Mutex
	// uid is the Node's UID, read with the Node; the CSINode's owner.
	// Guarded by mu.
	uid types.UID
}

// nodeUpdate changes node in place and reports whether it changed.
type nodeUpdate func(node *v1.Node) (changed bool, err error)

// install records a driver's node information: the Node's annotation and
// labels, then the CSINode entry (the kubelet's InstallCSIDriver).
func (n *nodeInfo) install(ctx context.Context, driver, nodeID string, maxVolumes int64, topology map[string]string) error {
	if nodeID == "" {
		return errors.New("error adding CSI driver node info: driverNodeID must not be empty")
	}
	if err := n.updateNode(ctx, nodeIDAdd(driver, nodeID), topologyLabels(topology)); err != nil {
		return fmt.Errorf("error updating Node object with CSI driver node info: %w", err)
	}
	if err := n.updateCSINode(ctx, func(ctx context.Context) error {
		return n.tryInstallInCSINode(ctx, driver, nodeID, maxVolumes, topology)
	}); err != nil {
		return fmt.Errorf("error updating CSINode object with CSI driver node info: %w", err)
	}
	return nil
}

// uninstall removes a driver's CSINode entry, then its node ID annotation
// entry; its topology labels stay (the kubelet's UninstallCSIDriver).
func (n *nodeInfo) uninstall(ctx context.Context, driver string) error {
	if err := n.updateCSINode(ctx, func(ctx context.Context) error { return n.tryUninstallFromCSINode(ctx, driver) }); err != nil {
		return fmt.Errorf("error uninstalling CSI driver from CSINode object %w", err)
	}
	if err := n.updateNode(ctx, nodeIDRemove(driver)); err != nil {
		return fmt.Errorf("error removing CSI driver node info from Node object %w", err)
	}
	return nil
}

// retry tries f up to updateBackoff's steps, until it succeeds; the error
// has every try's.
func (n *nodeInfo) retry(ctx context.Context, f func(context.Context) error) error {
	var errs []error
	err := wait.ExponentialBackoffWithContext(ctx, updateBackoff, func(ctx context.Context) (bool, error) {
		if err := f(ctx); err != nil {
			errs = append(errs, err)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("%w; caused by: %w", err, utilerrors.NewAggregate(errs))
	}
	return nil
}

// updateCSINode retries a change of the CSINode.
func (n *nodeInfo) updateCSINode(ctx context.Context, try func(context.Context) error) error {
	if err := n.retry(ctx, try); err != nil {
		return fmt.Errorf("error updating CSINode: %w", err)
	}
	return nil
}

// updateNode applies updates to the current Node and patches it when one
// changed it (the kubelet's updateNode).
func (n *nodeInfo) updateNode(ctx context.Context, updates ...nodeUpdate) error {
	if err := n.retry(ctx, func(ctx context.Context) error { return n.tryUpdateNode(ctx, updates) }); err != nil {
		return fmt.Errorf("error updating node: %w", err)
	}
	return nil
}

func (n *nodeInfo) tryUpdateNode(ctx context.Context, updates []nodeUpdate) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	orig, err := n.nodes.Nodes().Get(ctx, n.name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	n.uid = orig.UID
	node := orig.DeepCopy()
	changed := false
	for _, u := range updates {
		c, err := u(node)
		if err != nil {
			return err
		}
		changed = changed || c
	}
	if !changed {
		return nil
	}
	// A PATCH of nodes/status carries the metadata's labels and
	// annotations too.
	_, _, err = nodeutil.PatchNodeStatus(n.nodes, types.NodeName(n.name), orig, node)
	return err
}

// nodeIDs is the driver → node ID map of the node's annotation.
func nodeIDs(node *v1.Node) (map[string]string, error) {
	ids := map[string]string{}
	if s := node.Annotations[AnnotationNodeID]; s != "" {
		if err := json.Unmarshal([]byte(s), &ids); err != nil {
			return nil, fmt.Errorf("failed to parse node's %q annotation value (%q) err=%w", AnnotationNodeID, s, err)
		}
	}
	return ids, nil
}

// nodeIDAdd sets driver's node ID in the annotation.
func nodeIDAdd(driver, nodeID string) nodeUpdate {
	return func(node *v1.Node) (bool, error) {
		ids, err := nodeIDs(node)
		if err != nil {
			return false, err
		}
		if ids[driver] == nodeID {
			return false, nil
		}
		ids[driver] = nodeID
		b, err := json.Marshal(ids)
		if err != nil {
			return false, err
		}
		if node.Annotations == nil {
			node.Annotations = map[string]string{}
		}
		node.Annotations[AnnotationNodeID] = string(b)
		return true, nil
	}
}

// nodeIDRemove removes driver from the annotation, and the annotation
// when no driver is left.
func nodeIDRemove(driver string) nodeUpdate {
	return func(node *v1.Node) (bool, error) {
		if node.Annotations[AnnotationNodeID] == "" {
			return false, nil
		}
		ids, err := nodeIDs(node)
		if err != nil {
			return false, err
		}
		if _, ok := ids[driver]; !ok {
			return false, nil
		}
		delete(ids, driver)
		if len(ids) == 0 {
			delete(node.Annotations, AnnotationNodeID)
			return true, nil
		}
		b, err := json.Marshal(ids)
		if err != nil {
			return false, err
		}
		node.Annotations[AnnotationNodeID] = string(b)
		return true, nil
	}
}

// topologyLabels sets the topology segments as the node's labels; a label
// already set to another value is an error and nothing is set.
func topologyLabels(topology map[string]string) nodeUpdate {
	return func(node *v1.Node) (bool, error) {
		if len(topology) == 0 {
			return false, nil
		}
		for k, v := range topology {
			if cur, ok := node.Labels[k]; ok && cur != v {
				return false, fmt.Errorf("detected topology value collision: driver reported %q:%q but existing label is %q:%q", k, v, k, cur)
			}
		}
		if node.Labels == nil {
			node.Labels = map[string]string{}
		}
		for k, v := range topology {
			node.Labels[k] = v
		}
		// The kubelet patches even when every label was there: the patch
		// is then empty.
		return true, nil
	}
}

// tryInstallInCSINode writes driver's entry into the CSINode, made when
// missing (the kubelet's tryUpdateCSINode and installDriverToCSINode).
func (n *nodeInfo) tryInstallInCSINode(ctx context.Context, driver, nodeID string, maxVolumes int64, topology map[string]string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	csiNode, err := n.csiNodes.CSINodes().Get(ctx, n.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		csiNode, err = n.createCSINode(ctx)
	}
	if err != nil {
		return err
	}
	if err := n.ensureOwned(ctx, csiNode); err != nil {
		return err
	}

	keys := sets.KeySet(topology)
	unchanged := false
	drivers := []storagev1.CSINodeDriver{}
	for _, d := range csiNode.Spec.Drivers {
		if d.Name != driver {
			drivers = append(drivers, d)
			continue
		}
		unchanged = d.NodeID == nodeID && sets.New(d.TopologyKeys...).Equal(keys) && sameCount(d, maxVolumes)
	}
	annotated := setMigrated(csiNode)
	if unchanged && !annotated {
		return nil
	}
	entry := storagev1.CSINodeDriver{Name: driver, NodeID: nodeID, TopologyKeys: sets.List(keys)}
	switch {
	case maxVolumes > 0:
		if maxVolumes > math.MaxInt32 {
			log.G(ctx).Warnf("Exceeded max supported attach limit value, truncating it to %d", math.MaxInt32)
			maxVolumes = math.MaxInt32
		}
		count := int32(maxVolumes)
		entry.Allocatable = &storagev1.VolumeNodeResources{Count: &count}
	case maxVolumes < 0:
		log.G(ctx).Errorf("Invalid attach limit value %d cannot be added to CSINode object for %q", maxVolumes, driver)
	}
	csiNode.Spec.Drivers = append(drivers, entry)
	_, err = n.csiNodes.CSINodes().Update(ctx, csiNode, metav1.UpdateOptions{})
	return err
}

// sameCount reports whether d's allocatable count is what maxVolumes
// makes it (none for 0).
func sameCount(d storagev1.CSINodeDriver, maxVolumes int64) bool {
	if maxVolumes == 0 {
		return d.Allocatable == nil || d.Allocatable.Count == nil
	}
	return d.Allocatable != nil && d.Allocatable.Count != nil && int64(*d.Allocatable.Count) == maxVolumes
}

// tryUninstallFromCSINode removes driver's entry; no CSINode, or no entry,
// is no error.
func (n *nodeInfo) tryUninstallFromCSINode(ctx context.Context, driver string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	csiNode, err := n.csiNodes.CSINodes().Get(ctx, n.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	drivers := []storagev1.CSINodeDriver{}
	for _, d := range csiNode.Spec.Drivers {
		if d.Name != driver {
			drivers = append(drivers, d)
		}
	}
	if len(drivers) == len(csiNode.Spec.Drivers) {
		return nil
	}
	csiNode.Spec.Drivers = drivers
	_, err = n.csiNodes.CSINodes().Update(ctx, csiNode, metav1.UpdateOptions{})
	return err
}

// createCSINode creates the node's CSINode without drivers, owned by the
// Node, with the migrated-plugins annotation. Called with mu held.
func (n *nodeInfo) createCSINode(ctx context.Context) (*storagev1.CSINode, error) {
	if n.uid == "" {
		// Never an owner reference without the UID (the kubelet relies on
		// its initialization having read it).
		node, err := n.nodes.Nodes().Get(ctx, n.name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		n.uid = node.UID
	}
	csiNode := &storagev1.CSINode{
		ObjectMeta: metav1.ObjectMeta{
			Name:            n.name,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: n.name, UID: n.uid}},
		},
		Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{}},
	}
	setMigrated(csiNode)
	return n.csiNodes.CSINodes().Create(ctx, csiNode, metav1.CreateOptions{})
}

// ensureOwned deletes csiNode and returns an error when the Node does not
// own it (no owner reference of kind Node with the node's name and UID),
// so that the next try makes it again. Called with mu held.
func (n *nodeInfo) ensureOwned(ctx context.Context, csiNode *storagev1.CSINode) error {
	var owner types.UID
	for _, ref := range csiNode.OwnerReferences {
		if ref.Kind != "Node" {
			continue
		}
		owner = ref.UID
		if ref.Name == n.name && ref.UID == n.uid {
			return nil
		}
	}
	log.G(ctx).Infof("existing CSINode %q is owned by different node (oldNodeID=%q, newNodeID=%q), cleaning up...", csiNode.Name, owner, n.uid)
	if err := n.csiNodes.CSINodes().Delete(ctx, n.name, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("error deleting existing CSINode %q: %w", csiNode.Name, err)
	}
	return fmt.Errorf("CSINode %q was owned by different node (oldNodeID=%q, newNodeID=%q), deleted it", csiNode.Name, owner, n.uid)
}

// setMigrated sets the migrated-plugins annotation and reports whether it
// changed (the kubelet's setMigrationAnnotation).
func setMigrated(csiNode *storagev1.CSINode) bool {
	old := sets.New[string]()
	if s := csiNode.Annotations[v1.MigratedPluginsAnnotationKey]; s != "" {
		old = sets.New(strings.Split(s, ",")...)
	}
	if old.Equal(sets.New(migratedPlugins...)) {
		return false
	}
	if csiNode.Annotations == nil {
		csiNode.Annotations = map[string]string{}
	}
	csiNode.Annotations[v1.MigratedPluginsAnnotationKey] = strings.Join(migratedPlugins, ",")
	return true
}

// initialize waits for the API server, then creates or adopts the CSINode
// (the kubelet's initializeCSINode and InitializeCSINodeWithAnnotation).
func (n *nodeInfo) initialize(ctx context.Context) error {
	err := wait.PollUntilContextCancel(ctx, apiPollPeriod, true, func(ctx context.Context) (bool, error) {
		// From the API server's cache: only whether it answers matters.
		_, err := n.csiNodes.CSINodes().Get(ctx, n.name, metav1.GetOptions{ResourceVersion: "0"})
		if err == nil || apierrors.IsNotFound(err) {
			return true, nil
		}
		log.G(ctx).WithError(err).Debug("Failed to contact API server when waiting for CSINode publishing")
		return false, nil
	})
	if err != nil {
		return err
	}
	var last error
	err = wait.ExponentialBackoffWithContext(ctx, initBackoff, func(ctx context.Context) (bool, error) {
		if last = n.retry(ctx, n.tryInitialize); last != nil {
			last = fmt.Errorf("error updating CSINode annotation: %w", last)
			log.G(ctx).WithError(last).Error("Failed to initialize CSINode")
			return false, nil
		}
		return true, nil
	})
	if err != nil && last != nil {
		return fmt.Errorf("failed to initialize CSINode: %w", last)
	}
	return err
}

func (n *nodeInfo) tryInitialize(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	node, err := n.nodes.Nodes().Get(ctx, n.name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	n.uid = node.UID
	csiNode, err := n.csiNodes.CSINodes().Get(ctx, n.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = n.createCSINode(ctx)
		return err
	}
	if err != nil {
		return err
	}
	if err := n.ensureOwned(ctx, csiNode); err != nil {
		return err
	}
	if setMigrated(csiNode) {
		_, err = n.csiNodes.CSINodes().Update(ctx, csiNode, metav1.UpdateOptions{})
	}
	return err
}
