package nodestatus

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
)

// NotReadyReporter keeps the Node registered and NotReady while crivk
// waits for a runtime that is not up yet, as the kubelet does: it
// registers the node (creating it when it does not exist) with
// Ready=False "container runtime is down" and refreshes that condition's
// heartbeat every period, so the node lifecycle controller sees a node
// that is alive but not ready (NotReady, not Unknown) and the scheduler
// places nothing on it. Conditions the node does not own
// (NetworkUnavailable) are kept.
//
// It writes the Node itself, so it must have stopped (Run returned) before
// virtual-kubelet's node controller starts reporting: a late NotReady must
// not follow the controller's Ready. All fields are required.
type NotReadyReporter struct {
	Name  string
	Nodes corev1client.NodeInterface
	// Build makes the node crivk would register, with the given readiness
	// (BuildNode with the node's NodeConfig).
	Build  func(cri.Readiness, time.Time) (*v1.Node, error)
	Period time.Duration
	Now    func() time.Time
}

// Run reports every Period until ctx is done.
func (r *NotReadyReporter) Run(ctx context.Context) {
	t := time.NewTicker(r.Period)
	defer t.Stop()
	for {
		if err := r.report(ctx, RuntimeDownMessage); err != nil && ctx.Err() == nil {
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
func (r *NotReadyReporter) report(ctx context.Context, msg string) error {
	rd := cri.Readiness{Message: msg}
	now := r.Now()
	cur, err := r.Nodes.Get(ctx, r.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		n, err := r.Build(rd, now)
		if err != nil {
			return err
		}
		if _, err := r.Nodes.Create(ctx, n, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("registering node %s: %w", n.Name, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading node %s: %w", r.Name, err)
	}
	owned := NodeConditions(cur.Status.Conditions, rd, nil, now)
	conds := owned
	for _, c := range cur.Status.Conditions {
		if !hasCondition(owned, c.Type) {
			conds = append(conds, c)
		}
	}
	cur.Status.Conditions = conds
	if _, err := r.Nodes.UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating node %s status: %w", cur.Name, err)
	}
	return nil
}
