package nodestatus

import (
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// NodeRef is what the node's events are recorded on, the kubelet's two
// references of its Node (v1.37, #139921):
//
//   - NameOnly, the kubelet's nodeRef: Kind Node, APIVersion v1 and the
//     node's name, no UID. The kubelet's eviction manager
//     (EvictionThresholdMet) and image manager (FreeDiskSpaceFailed,
//     InvalidDiskCapacity) record on it.
//   - WithUID, the kubelet's nodeRefWithUID: the same with the Node's UID
//     once it is known, resolved once and kept (a Node deleted and
//     created again keeps the first UID in the events until crivk
//     restarts, as the kubelet's). Until then it is NameOnly. Every other
//     node event records on it: Starting, NodeReady and the other
//     condition events, ContainerGCFailed, ImageGCFailed.
//
// The UID is read through the source set by ResolveFrom (the node as the
// watch has it, View); before that, or while the source says "", WithUID
// retries at each event. Safe for concurrent use.
type NodeRef struct {
	name     string
	source   atomic.Pointer[func() types.UID]
	resolved atomic.Pointer[v1.ObjectReference]
}

// NewNodeRef returns the references of the node name, without a UID
// until ResolveFrom gives a source.
func NewNodeRef(name string) *NodeRef { return &NodeRef{name: name} }

// ResolveFrom sets where WithUID reads the Node's UID ("" while it is not
// known): the first source is kept.
func (r *NodeRef) ResolveFrom(uid func() types.UID) { r.source.CompareAndSwap(nil, &uid) }

// NameOnly is the reference without a UID. The caller must not modify it.
func (r *NodeRef) NameOnly() *v1.ObjectReference {
	return &v1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: r.name}
}

// WithUID is the reference with the Node's UID once known, else NameOnly.
// The caller must not modify it.
func (r *NodeRef) WithUID() *v1.ObjectReference {
	if ref := r.resolved.Load(); ref != nil {
		return ref
	}
	ref := r.NameOnly()
	src := r.source.Load()
	if src == nil {
		return ref
	}
	if ref.UID = (*src)(); ref.UID == "" {
		return ref
	}
	r.resolved.CompareAndSwap(nil, ref)
	return r.resolved.Load()
}
