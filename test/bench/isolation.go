package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
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
	// timeout bounds isolate; quiet is how many listings in a row must
	// find the node empty.
	timeout time.Duration
	quiet   int
}

// pods lists the pods a lane must not inherit: those of the benchmark
// namespace and those of any namespace bound to the node (another suite's
// left-overs on this machine's one cluster count against the node's
// maxPods and would make the agent reject the batch's last pods).
func (n *node) pods(ctx context.Context) ([]v1.Pod, error) {
	own, err := n.client.CoreV1().Pods(n.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing pods in %s: %w", n.ns, err)
	}
	bound, err := n.client.CoreV1().Pods(v1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", n.name).String()})
	if err != nil {
		return nil, fmt.Errorf("listing the pods bound to node %s: %w", n.name, err)
	}
	out := own.Items
	for _, p := range bound.Items {
		if p.Namespace != n.ns && p.Spec.NodeName == n.name {
			out = append(out, p)
		}
	}
	return out, nil
}

// clean removes whatever a lane left: the pods of the benchmark namespace
// and those bound to the node (forced: the lane's agent is stopped by now),
// every sandbox of the CRI (the raw lane's, or an agent's it did not finish
// removing) and the Node object (the next agent must not start from the
// previous one's conditions).
func (n *node) clean(ctx context.Context) error {
	var errs []error
	zero := int64(0)
	pods, err := n.pods(ctx)
	if err != nil {
		errs = append(errs, err)
	}
	for _, p := range pods {
		err := n.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("force-deleting pod %s/%s: %w", p.Namespace, p.Name, err))
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

// leftovers lists, by name, what the CRI, the namespace and the Node object
// still hold.
func (n *node) leftovers(ctx context.Context) ([]string, error) {
	var left []string
	sbs, err := n.cri.ListPodSandbox(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("listing CRI sandboxes: %w", err)
	}
	for _, sb := range sbs {
		left = append(left, "sandbox "+sandboxName(sb))
	}
	pods, err := n.pods(ctx)
	if err != nil {
		return nil, err
	}
	for _, p := range pods {
		left = append(left, "pod "+p.Namespace+"/"+p.Name)
	}
	if _, err := n.client.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{}); err == nil {
		left = append(left, "node "+n.name)
	} else if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("getting node %s: %w", n.name, err)
	}
	sort.Strings(left)
	return left, nil
}

// isolate makes the node empty for the next lane and checks that it stays
// so: it cleans, then lists, again and again, until n.quiet consecutive
// listings (n.poll apart) found nothing, for at most n.timeout. Errors of the runtime or the API
// server (a containerd still working through a backlog times out on
// ListPodSandbox) are retried, not fatal: the last one is in the error
// returned when timeout passes first. Consecutive empty listings, not one,
// because a RunPodSandbox whose caller timed out can still complete in
// containerd after the first clean.
func (n *node) isolate(ctx context.Context) error {
	timeout, quiet := n.timeout, max(n.quiet, 1)
	var left []string
	var lastErr error
	empty := 0
	err := wait.PollUntilContextTimeout(ctx, n.poll, timeout, true, func(ctx context.Context) (bool, error) {
		if empty == 0 {
			if err := n.clean(ctx); err != nil {
				lastErr = err
			}
		}
		l, err := n.leftovers(ctx)
		if err != nil {
			lastErr, empty = err, 0
			return false, nil
		}
		left = l
		if len(left) > 0 {
			empty = 0
			return false, nil
		}
		empty++
		return empty >= quiet, nil
	})
	if err == nil {
		return nil
	}
	msg := fmt.Sprintf("lane isolation broken: the node was not empty %d times in a row within %s", quiet, timeout)
	if len(left) > 0 {
		msg += ", left behind: " + strings.Join(left, ", ")
	}
	if lastErr != nil {
		return fmt.Errorf("%s; last error: %w", msg, lastErr)
	}
	return errors.New(msg)
}

func sandboxName(sb *runtimeapi.PodSandbox) string {
	m := sb.GetMetadata()
	return m.GetNamespace() + "/" + m.GetName()
}
