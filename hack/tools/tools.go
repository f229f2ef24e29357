//go:build tools

// Package tools pins the Kubernetes components the test environment builds
// (kube-apiserver, kube-scheduler, kube-controller-manager, kubelet, kubectl
// for the README's quick start, kube-proxy for the multi-machine cluster
// (#45), and for conformance e2e.test and agnhost).
// Product code never imports this module.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
