package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// sandboxes is the part of the CRI the isolation checks use.
type sandboxes interface {
	ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error)
	StopPodSandbox(ctx context.Context, podSandboxID string) error
	RemovePodSandbox(ctx context.Context, podSandboxID string) error
}

// node is where the lanes run: one CRI, one namespace, one Node name.
type node struct {
	cri    sandboxes
	client kubernetes.Interface
	ns     string
	name   string
	// poll is the interval of the waits for the API to catch up.
	poll time.Duration
}

// clean removes whatever a lane left: the pods of the benchmark namespace
// (forced: the lane's agent is stopped by now), every sandbox of the CRI (the
// raw lane's, or an agent's it did not finish removing) and the Node object
// (the next agent must not start from the previous one's conditions).
func (n *node) clean(ctx context.Context) error {
	var errs []error
	zero := int64(0)
	pods, err := n.client.CoreV1().Pods(n.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		errs = append(errs, fmt.Errorf("listing pods in %s: %w", n.ns, err))
	} else {
		for _, p := range pods.Items {
			err := n.client.CoreV1().Pods(n.ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
			if err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("force-deleting pod %s/%s: %w", n.ns, p.Name, err))
			}
		}
	}
	sbs, err := n.cri.ListPodSandbox(ctx, nil)
	if err != nil {
		errs = append(errs, fmt.Errorf("listing CRI sandboxes: %w", err))
	}
	for _, sb := range sbs {
		if err := n.cri.StopPodSandbox(ctx, sb.Id); err != nil {
			errs = append(errs, fmt.Errorf("stopping sandbox %s (%s): %w", sb.Id, sandboxName(sb), err))
			continue
		}
		if err := n.cri.RemovePodSandbox(ctx, sb.Id); err != nil {
			errs = append(errs, fmt.Errorf("removing sandbox %s (%s): %w", sb.Id, sandboxName(sb), err))
		}
	}
	if err := n.client.CoreV1().Nodes().Delete(ctx, n.name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("deleting node %s: %w", n.name, err))
	}
	return errors.Join(errs...)
}

// verify fails, naming them, when the CRI holds a sandbox, the namespace a
// pod or the Node object still exists: the next lane would start loaded.
// It waits up to timeout for the API server to finish deletions in flight.
func (n *node) verify(ctx context.Context, timeout time.Duration) error {
	var left []string
	err := wait.PollUntilContextTimeout(ctx, n.poll, timeout, true, func(ctx context.Context) (bool, error) {
		left = left[:0]
		sbs, err := n.cri.ListPodSandbox(ctx, nil)
		if err != nil {
			return false, fmt.Errorf("listing CRI sandboxes: %w", err)
		}
		for _, sb := range sbs {
			left = append(left, "sandbox "+sandboxName(sb))
		}
		pods, err := n.client.CoreV1().Pods(n.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, fmt.Errorf("listing pods in %s: %w", n.ns, err)
		}
		for _, p := range pods.Items {
			left = append(left, "pod "+n.ns+"/"+p.Name)
		}
		if _, err := n.client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{}); err == nil {
			left = append(left, "node "+n.name)
		} else if !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("getting node %s: %w", n.name, err)
		}
		return len(left) == 0, nil
	})
	if err != nil && len(left) > 0 {
		sort.Strings(left)
		return fmt.Errorf("lane isolation broken, left behind: %s", strings.Join(left, ", "))
	}
	return err
}

func sandboxName(sb *runtimeapi.PodSandbox) string {
	m := sb.GetMetadata()
	return m.GetNamespace() + "/" + m.GetName()
}
