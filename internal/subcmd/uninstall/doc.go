// Package uninstall is `crivk uninstall drain|remove`, the chart's
// uninstall hooks (charts/crivk/templates/uninstall.yaml,
// docs/coexistence.md), run as Jobs with a ServiceAccount of their own.
// cmd/crivk dispatches `crivk uninstall ...` to Run and nothing else; the
// package shares nothing with the node agent but the API objects:
//
//	helm uninstall
//	  pre-delete:  crivk uninstall drain   the release's crivk nodes (by the
//	               node labels the chart gives them) are cordoned and tainted
//	               crivk.io/uninstalling:NoExecute, their pods deleted; it
//	               waits until every pod is gone: crivk, still running, stops
//	               each pod's containers before the object goes
//	  helm deletes the DaemonSet: crivk exits; its runtime container finds
//	               no pod left and stops crivk's containerd
//	  post-delete: crivk uninstall remove  waits until the DaemonSet's pods
//	               are gone, then deletes the nodes (their Leases follow by
//	               their owner reference)
//
// A drain that cannot finish within --timeout fails the hook, naming the
// pods left: helm uninstall then stops with that message and the release
// stays (`helm uninstall --no-hooks` leaves the pods and nodes instead).
//
// It must never force-delete a pod (grace 0) nor delete a node while crivk
// pods still run on it: the pods' objects go only after crivk has stopped
// their containers, which is the project's deletion guarantee.
package uninstall
