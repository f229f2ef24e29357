// Package staticpods runs the node's static pods, as the kubelet's file
// source (pkg/kubelet/config/file.go, common.go) and mirror client
// (pkg/kubelet/pod/mirror_client.go): pods read from --pod-manifest-path
// that run without the API, each shown in the API by a mirror pod.
//
// The pieces and who calls what:
//
//	manifests ──Source (read at start, on fsnotify events, every
//	            --file-check-frequency)──UpdatePod / Kill──> lifecycle.Engine
//	                  │ Pods, Terminating                      │ publish (status)
//	                  v                                        v
//	            Mirrors <──SetStatus── Apart(engine).NotifyPods
//	              │ create / delete (grace 0, UID precondition) / UpdateStatus
//	              v
//	            API server (mirror pods) ──pod informer──> Mirrors.Handler (kick)
//	                                      └──> virtual-kubelet ──> Apart(engine)
//
// A static pod (manifest.go) has the kubelet's defaults: the UID is a hash
// of the manifest, the node and the file (a changed file is a new pod: the
// old UID is killed, the new one started once the old is finished, as the
// engine serialises pods of one name; a file removed and written again
// with the same content is, as for the kubelet, a removal then an addition
// of the same UID: killed, then started again by the engine once stopped,
// its restartCount counting on, its mirror pod kept); the name
// "<name>-<node>"; the namespace "default" when none; spec.nodeName; the
// annotations kubernetes.io/config.source=file, config.hash (the UID) and
// config.seen;
// a toleration of every NoExecute taint; the API server's defaults the
// engine reads (restartPolicy, dnsPolicy, imagePullPolicy, probe periods,
// requests from limits...). A pod that references API objects (service
// account, secrets, config maps, claims) is refused, as the kubelet's
// PreventStaticPodAPIReferences (on in v1.35) and NodeRestriction require.
//
// The mirror pod is a copy of the static pod with
// kubernetes.io/config.mirror = the hash and one controller owner
// reference to the Node (its UID read from the node's own object;
// NodeRestriction admits nothing else from a node). Mirrors keeps one per
// static pod: created when missing; deleted with grace 0 and its UID as
// precondition, then created again, when it is marked for deletion (a user
// deleted it) or carries another hash, but never while an older static
// pod of its name terminates (the new one has not started: the old
// mirror stays, with its UID and status, for the old pod's grace
// period, as the kubelet's mirror checks run only in the new pod's
// SyncPod); deleted when no static pod of its
// name exists and none is terminating (removing the file: the containers
// stop first, then the mirror goes, as the kubelet's HandlePodCleanups).
// A mirror pod of another static pod than the current one (an orphan, or
// of an older version) is also kept while the runtime still has a running
// container or a ready sandbox of the pod it reflects (its hash is that
// pod's UID; MirrorConfig.Running): after a restart with the manifest
// removed or changed while crivk was down, nothing in memory says the old
// pod terminates, and its mirror must not go before its containers (the
// kubelet would delete it at once; crivk's rule is stricter).
//
// Keeping static pods apart from the API's pods is the design's point; it
// is enforced in three places, each by one wrapper of this package that
// internal/nodeagent puts around the engine's hooks:
//
//   - Apart(engine) is the engine virtual-kubelet's provider gets. Mirror
//     pods never reach the engine: virtual-kubelet sees them through the
//     node's pod informer and calls CreatePod/UpdatePod/DeletePod with
//     them; Apart turns each into a kick of the mirror client. That also
//     covers podwriter.DeleteGuard, whose terminate is the provider's
//     DeletePod: a force delete of a mirror pod never kills its static
//     pod. Static pods never reach virtual-kubelet: GetPod and GetPods do
//     not return them (its start-up sweep would delete a pod the API does
//     not have), and their statuses go to Mirrors.SetStatus instead of
//     virtual-kubelet's status queue, which would write them to nothing.
//   - OnTerminated wraps podwriter.DeleteOnTerminated: a static pod has no
//     API object of its own (the mirror's UID differs, so the UID
//     precondition would refuse anyway), so the deletion path is skipped;
//     its end is recorded, and the mirror client deletes an orphaned mirror.
//     The mirror pod is therefore never deleted by the deletion path while
//     the static pod exists.
//   - WithStatic adds the static pods to the pods housekeeping must not take
//     for orphans, and internal/nodeagent counts the source's first read in
//     APIPodsSynced (the kubelet's sourcesReady): after a restart, static
//     pods' containers are adopted, not swept.
//
// The status the mirror pod shows is the engine's status of the static pod
// (the kubelet's status manager translating the UID), written when it
// differs, other writers' conditions kept by status.WithForeignConditions:
// also when another writer overwrote crivk's write (the node lifecycle
// controller's MarkPodsNotReady), not while the lister still shows the
// object of crivk's own write or the one it replaced
// (TestMirrorStatusWrittenBack). The mirror's status is the API's status
// of the static pod for the engine too (its syncer takes the status of
// the API object of the pod's name whose mirror annotation is the pod's
// UID): right after a crivk restart the engine publishes no status of a
// static pod until its mirror pod is known (at most 30 s), so that its
// containers stay started and ready as the mirror says until their probes
// run; MirrorSeenKicks syncs the static pod again when its mirror pod
// appears in the informer.
//
// The package must never run a mirror pod, never delete a pod that is not
// a mirror pod, never delete a mirror pod of a static pod that still runs
// (unless to recreate it), and never write a status to a mirror pod of
// another hash.
package staticpods
