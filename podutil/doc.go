// Package podutil holds rules the kubelet derives from a pod's spec alone
// and that more than one of crivk's packages need: the QoS class today.
// It is a leaf: it imports only k8s.io/api and apimachinery, never another
// crivk package, and it does no I/O.
package podutil
