// Package evictionapi is the kubelet's pkg/kubelet/eviction/api for crivk:
// the eviction signals, the one Threshold type, the kubelet's default of
// --eviction-hard (DefaultHard) and the one parser of the eviction flags
// (ParseThresholds). Both consumers of --eviction-hard read its result:
// nodestatus takes the hard memory.available and nodefs.available
// thresholds off the node's allocatable (Reservations.EvictionHard), and
// the eviction manager (package eviction) watches them all. A flag is
// parsed once, in cmd/crivk, into []Threshold that both are given.
//
// It is a leaf: it imports only k8s.io/api and apimachinery, never another
// crivk package, and it does no I/O, so that nodestatus and eviction,
// which never import each other, both import it.
package evictionapi
