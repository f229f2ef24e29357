package uninstall

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/crivk/crivk/internal/incluster"
	"sort"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/util/retry"
)

// uninstallTaint keeps new pods off a node being removed and evicts those
// that do not tolerate it.
const uninstallTaint = "crivk.io/uninstalling"

type uninstallOptions struct {
	phase     string
	nodes     string
	namespace string
	agentPods string
	timeout   time.Duration
	poll      time.Duration
}

func parseUninstallFlags(args []string) (*uninstallOptions, error) {
	o := &uninstallOptions{}
	if len(args) == 0 || (args[0] != "drain" && args[0] != "remove") {
		return nil, errors.New("usage: crivk uninstall drain|remove --node-selector=... [--namespace=... --agent-selector=...]")
	}
	o.phase = args[0]
	fs := flag.NewFlagSet("crivk uninstall "+o.phase, flag.ContinueOnError)
	fs.StringVar(&o.nodes, "node-selector", "", "label selector of the release's crivk nodes")
	fs.StringVar(&o.namespace, "namespace", "", "namespace of crivk's DaemonSet (remove)")
	fs.StringVar(&o.agentPods, "agent-selector", "", "label selector of crivk's DaemonSet pods (remove: the nodes go once these are gone)")
	fs.DurationVar(&o.timeout, "timeout", 4*time.Minute, "how long to wait for the pods to go")
	fs.DurationVar(&o.poll, "poll", time.Second, "how often to look")
	if err := fs.Parse(args[1:]); err != nil {
		return nil, err
	}
	if o.nodes == "" {
		return nil, errors.New("--node-selector is required: without it every node would match")
	}
	if o.phase == "remove" && (o.namespace == "" || o.agentPods == "") {
		return nil, errors.New("remove needs --namespace and --agent-selector (the DaemonSet's pods)")
	}
	if o.timeout <= 0 || o.poll <= 0 {
		return nil, fmt.Errorf("--timeout %s and --poll %s must be positive", o.timeout, o.poll)
	}
	return o, nil
}

// Run is `crivk uninstall` with its arguments (after "uninstall"): the
// phase, drain or remove, then its flags. It talks to the API server with
// the Job's service account ($CRIVK_API_SERVER overriding the server).
func Run(ctx context.Context, args []string) error {
	o, err := parseUninstallFlags(args)
	if err != nil {
		return err
	}
	cfg, err := incluster.Config()
	if err != nil {
		return err
	}
	// The core API only: a full kubernetes.NewForConfig would link every
	// API group's typed client into crivk's binary (about 8 MB of code and
	// read-only data, resident in every node agent; issue #33).
	c, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return err
	}
	u := &uninstaller{o: o, c: c, log: logrus.WithField("phase", o.phase)}
	if o.phase == "drain" {
		return u.drain(ctx)
	}
	return u.remove(ctx)
}

type uninstaller struct {
	o   *uninstallOptions
	c   corev1client.CoreV1Interface
	log *logrus.Entry
}

func (u *uninstaller) nodeNames(ctx context.Context) ([]string, error) {
	l, err := u.c.Nodes().List(ctx, metav1.ListOptions{LabelSelector: u.o.nodes})
	if err != nil {
		return nil, fmt.Errorf("listing the nodes %s: %w", u.o.nodes, err)
	}
	var names []string
	for _, n := range l.Items {
		names = append(names, n.Name)
	}
	sort.Strings(names)
	return names, nil
}

// drain cordons and taints the nodes, deletes their pods and waits until
// none is left.
func (u *uninstaller) drain(ctx context.Context) error {
	nodes, err := u.nodeNames(ctx)
	if err != nil {
		return err
	}
	u.log.Infof("draining %d crivk nodes %v", len(nodes), nodes)
	for _, n := range nodes {
		if err := u.cordon(ctx, n); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(u.o.timeout)
	for {
		var left []string
		for _, n := range nodes {
			pods, err := u.c.Pods("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", n).String()})
			if err != nil {
				return fmt.Errorf("listing the pods of node %s: %w", n, err)
			}
			for i := range pods.Items {
				p := &pods.Items[i]
				if p.Spec.NodeName != n {
					continue
				}
				left = append(left, n+": "+p.Namespace+"/"+p.Name)
				if p.DeletionTimestamp != nil {
					continue
				}
				// The pod's own grace period: crivk stops its containers,
				// then the object goes.
				err := u.c.Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(p.UID))})
				switch {
				case err == nil:
					u.log.Infof("deleting pod %s/%s on %s", p.Namespace, p.Name, n)
				case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
				default:
					return fmt.Errorf("deleting pod %s/%s on %s: %w", p.Namespace, p.Name, n, err)
				}
			}
		}
		if len(left) == 0 {
			u.log.Infof("every pod of %v is gone", nodes)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %s, %d pods are still on the crivk nodes (%s); `helm uninstall --no-hooks` leaves them and the nodes", u.o.timeout, len(left), strings.Join(left, ", "))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(u.o.poll):
		}
	}
}

// cordon marks the node unschedulable and taints it uninstallTaint
// (NoExecute: the taint manager evicts what does not tolerate it, the
// DaemonSet controller stops placing pods there).
func (u *uninstaller) cordon(ctx context.Context, name string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := u.c.Nodes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if !addUninstallTaint(n) {
			return nil
		}
		_, err = u.c.Nodes().Update(ctx, n, metav1.UpdateOptions{})
		if err == nil {
			u.log.Infof("node %s cordoned and tainted %s:NoExecute", name, uninstallTaint)
		}
		return err
	})
}

// addUninstallTaint cordons n and adds the taint; false when both are
// there already.
func addUninstallTaint(n *v1.Node) bool {
	changed := !n.Spec.Unschedulable
	n.Spec.Unschedulable = true
	for _, t := range n.Spec.Taints {
		if t.Key == uninstallTaint && t.Effect == v1.TaintEffectNoExecute {
			return changed
		}
	}
	now := metav1.Now()
	n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: uninstallTaint, Effect: v1.TaintEffectNoExecute, TimeAdded: &now})
	return true
}

// remove waits until crivk's DaemonSet pods are gone, then deletes the
// nodes.
func (u *uninstaller) remove(ctx context.Context) error {
	deadline := time.Now().Add(u.o.timeout)
	for {
		l, err := u.c.Pods(u.o.namespace).List(ctx, metav1.ListOptions{LabelSelector: u.o.agentPods})
		if err != nil {
			return fmt.Errorf("listing crivk's pods: %w", err)
		}
		if len(l.Items) == 0 {
			break
		}
		if time.Now().After(deadline) {
			// Deleting the node under a running crivk is still better than
			// leaving a node no crivk will serve.
			u.log.Warnf("after %s, %d of crivk's pods are still there; deleting the nodes anyway", u.o.timeout, len(l.Items))
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(u.o.poll):
		}
	}
	nodes, err := u.nodeNames(ctx)
	if err != nil {
		return err
	}
	for _, n := range nodes {
		err := u.c.Nodes().Delete(ctx, n, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting node %s: %w", n, err)
		}
		u.log.Infof("node %s deleted", n)
	}
	return nil
}
