package main

import (
	"context"
	"fmt"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/crivk/crivk/cri"
	"github.com/crivk/crivk/provider"
)

// runtimeDownMessage is the kubelet's Ready message while its container
// runtime does not answer (pkg/kubelet/kubelet_node_status.go,
// "container runtime is down").
const runtimeDownMessage = "container runtime is down"

// notReadyReporter keeps the Node registered and NotReady while crivk
// waits for a runtime that is not up yet, as the kubelet does: it
// registers the node (creating it when it does not exist) with
// Ready=False "container runtime is down" and refreshes that condition's
// heartbeat every period, so the node lifecycle controller sees a node
// that is alive but not ready (NotReady, not Unknown) and the scheduler
// places nothing on it. Conditions the node does not own
// (NetworkUnavailable) are kept.
type notReadyReporter struct {
	name  string
	nodes corev1client.NodeInterface
	// build makes the node crivk would register, with the given readiness.
	build  func(cri.Readiness, time.Time) (*v1.Node, error)
	period time.Duration
	now    func() time.Time
}

// run reports until ctx is done.
func (r *notReadyReporter) run(ctx context.Context) {
	t := time.NewTicker(r.period)
	defer t.Stop()
	for {
		if err := r.report(ctx, runtimeDownMessage); err != nil && ctx.Err() == nil {
			log.G(ctx).WithError(err).Warn("reporting the node NotReady while waiting for the container runtime")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// report posts Ready=False with msg once: a Create when the node does not
// exist, otherwise a status update of the node's own conditions.
func (r *notReadyReporter) report(ctx context.Context, msg string) error {
	rd := cri.Readiness{Message: msg}
	now := r.now()
	cur, err := r.nodes.Get(ctx, r.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		n, err := r.build(rd, now)
		if err != nil {
			return err
		}
		if _, err := r.nodes.Create(ctx, n, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("registering node %s: %w", n.Name, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading node: %w", err)
	}
	owned := provider.NodeConditions(cur.Status.Conditions, rd, now)
	conds := owned
	for _, c := range cur.Status.Conditions {
		if !hasCondition(owned, c.Type) {
			conds = append(conds, c)
		}
	}
	cur.Status.Conditions = conds
	if _, err := r.nodes.UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating node %s status: %w", cur.Name, err)
	}
	return nil
}

func hasCondition(conds []v1.NodeCondition, t v1.NodeConditionType) bool {
	for _, c := range conds {
		if c.Type == t {
			return true
		}
	}
	return false
}
