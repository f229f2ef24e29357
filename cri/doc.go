// Package cri is crivk's runtime manager: it turns a pod spec plus what the
// container runtime reports into CRI calls, the way the kubelet's
// pkg/kubelet/kuberuntime does, and reads the runtime's state back as a
// PodStatus.
//
// It owns no pod state. Everything it knows about a pod it reads back from
// the runtime through the labels and annotations it puts on sandboxes and
// containers (the same keys the kubelet uses, so crictl and other tooling
// show crivk's pods as they show the kubelet's).
//
// The caller (package lifecycle) runs this loop per pod:
//
//	status, err := rt.GetPodStatus(ctx, RefOf(pod))          // read
//	plan := ComputePodActions(pod, status, inputs)           // pure: decide
//	res := rt.SyncPod(ctx, pod, status, plan, backoffs, now) // act, per-step results
//	...
//	err = rt.KillPod(ctx, pod, status, grace)                // on termination
//	err = rt.RemovePod(ctx, status)                          // once deleted
//
// ComputePodActions is a pure function and is table-tested: which sandbox
// to create, which init container, sidecars, regular and ephemeral
// containers to start, which containers to kill and why (a failed
// liveness or startup probe among the reasons, with the probe's grace),
// which dead instances to remove, which containers the restart or pull
// back-off holds back (CrashLoopBackOff, ImagePullBackOff). Its inputs
// besides the spec and the runtime's state are read-only views
// (PlanInputs): the probes' verdicts and the back-offs. SyncPod and
// KillPod carry out the plan, record what happened (the back-off moves
// on, a pull failure starts a pull back-off) and report per-step errors;
// they decide nothing.
// Back-off state belongs to the caller and is passed in.
//
// The init sequence is the kubelet's (initActions): the pod counts as
// initialized only while a regular container is created or running, and
// the init containers are read from the last back; a pod given a new
// sandbox (a node reboot) has its old init containers removed by SyncPod
// after KillPod, so the sequence runs again from the first
// (TestComputePodActionsInitSequence,
// TestSyncPodNodeRebootRunsInitSequenceAgain).
//
// A pod restarts all its containers in place (restartall.go, the
// restartPolicyRules action RestartAllContainers) while its status says so
// (PlanInputs.RestartAllContainers, from the AllContainersRestarting
// condition lifecycle/status generates): the plan is then only
// ContainersToReset, every instance of its init and regular containers,
// which SyncPod stops with no grace and removes, logs kept; the plan after
// finds none of them and runs the init sequence again from the first, in
// the same sandbox (TestComputePodActionsRestartAllContainers,
// TestSyncPodRestartAllContainers).
//
// Connect talks to the runtime through crivk's own CRI client (remote.go),
// which implements exactly the calls crivk makes (RuntimeService and
// ImageService, service.go): the runtime and image services over one gRPC
// connection, with the kubelet's per-call deadlines (Config.RequestTimeout,
// the kubelet's --runtime-request-timeout) and response checks. Container
// resources (resources.go) are the kubelet's per QoS class; the swap limit
// is the kubelet's NoSwap one for the host's swap controller (swap.go,
// Config.Swap, SwapControllerOf), and on cgroup v2 every container's
// cgroup is an OOM group unless singleProcessOOMKill (oomgroup.go,
// Config.OOMKillGroup), both at creation and at an in-place resize
// (TestNoSwapLimit, TestOOMKillGroup). The package never reads the host's
// cgroups: package cm does, and the wiring hands it the results. Container logs
// are read by the subpackage crilog.
//
// Some containerd releases abort when two of crivk's own calls meet
// (storeguard.go): from 1.6.0 to 1.6.21 (and 1.7.0's betas) the CRI
// plugin's sandbox store writes its map under a read lock in
// UpdateContainerStats, which PodSandboxStats and ListPodSandboxStats call
// for each sandbox, so a ListPodSandbox (or another sandbox stats call) at
// the same time can kill containerd with "concurrent map iteration and map
// write" (fixed by https://github.com/containerd/containerd/pull/8130, in
// 1.7.0, and its backport https://github.com/containerd/containerd/pull/8819,
// in 1.6.22). When Version names such a containerd at connect time, the
// client takes a readers-writer guard around each of these RPCs: the
// sandbox stats calls exclusively, ListPodSandbox, PodSandboxStatus,
// ListContainers and ListContainerStats shared; on any other runtime it
// takes nothing (TestStoreGuardOrdersCalls,
// TestStoreGuardOnAffectedContainerd). A call waiting for the guard
// returns its context's error when the context ends
// (TestStoreGuardHungStats). The guard narrows the race, it does not close
// it: the calls that look a sandbox up once and run long (CreateContainer,
// StartContainer, StopPodSandbox, RemovePodSandbox, PortForward and the
// other streaming calls) are not ordered, nor is containerd's own event
// loop, nor any other client of the same containerd (a kubelet, crictl).
//
// Confinement (confinement.go) is passed to the runtime as the kubelet
// passes it, or the pod is refused; no field is dropped (docs/security.md
// lists every field, where it is enforced and the test that proves it):
// the RuntimeClass's handler goes to RunPodSandbox (a pod naming a class
// that cannot be resolved gets no sandbox, never the default handler);
// hostUsers: false runs the pod in a user namespace of its own, with the
// ID mappings of Config.UserNamespaces (package userns) and every mount
// idmapped, or fails the sandbox with the kubelet's message where the
// runtime handler has no user namespaces; AppArmor and seccomp profiles go to each container (the
// sandbox always runs RuntimeDefault seccomp), a Localhost seccomp profile
// resolved under Config.SeccompProfileRoot; procMount decides the masked
// /proc paths; the mounts that ask for SELinux relabelling (volumes of the
// kubelet's relabelling plugins, /etc/hosts, the termination message file)
// keep the ask only on a host with SELinux (selinux.go,
// Config.SELinuxEnabled). Every container carries the kubelet's spec hash
// (HashContainer); ComputePodActions kills and restarts a running
// container whose image changed.
//
// In-place resize (resize.go, InPlacePodVerticalScaling): the pod a plan
// is made for carries its allocated resources (package lifecycle decides
// whether a resize fits); a running container whose runtime-reported
// values (the CRI status' resources), or whose actuated memory request
// (its creation's AnnotationMemoryRequest, or the last in-place update's),
// differ from them is resized in place, ContainersToUpdate per resource with decreases first, or killed
// and started again when its resizePolicy says RestartContainer. SyncPod
// applies it after the init containers, before the regular ones start:
// per resource, memory then CPU, the pod cgroup (Config.PodCgroups)
// grows first, then the containers are updated (UpdateContainerResources),
// then the pod cgroup shrinks; a memory limit decrease to below usage is
// refused first (SyncResult.ResizeErr). A pod-level resize (the allocated
// pod's spec.resources) needs no container update to be carried out: the
// plan's UpdatePodLevelResources (PlanInputs.PodCgroupResizing, from
// Runtime.PodCgroupResizing: the pod cgroup's values as last written
// differ from the allocated pod's) resizes the pod cgroup in the same
// order; containers without their own limits take the pod-level ones and
// are resized as above. ResizeInProgress and ActualResources read the
// runtime's side for the pod status.
//
// The container and sandbox garbage collector (gc.go, ContainerGC, the
// kubelet's kuberuntime_gc) shares its dead-instance rule with the plan's
// ContainersToRemove; it learns which pods are gone through PodState
// (lifecycle.Engine). Each started container's log is linked from
// Config.ContainerLogsDir (logsymlink.go, the kubelet's
// /var/log/containers/<pod>_<ns>_<container>-<id>.log); the link goes
// before its container, and the collector sweeps links left dangling.
// images.go reads the images for package images' image
// collector (ListImages, RemoveImage, ContainerImages, SandboxImage).
//
// A pull's credentials (image.go, podCredentials: the kubelet's keyring,
// pkg/kubelet/images/image_manager.go makeLookupPullCredentialsFunc) are
// tried in order until one succeeds, anonymously when there is none: the
// pod's pull secrets' for the image's registry (pullsecrets.go), most
// specific key first, then those of the node's image credential provider
// plugins (SetCredentialProviders, package credentialprovider, asked for
// the image's repository with the pod's namespace, name, UID and service
// account), in their keyring's order. Each keeps where it came from for
// the pulled record: a secret, a provider's service account (token mode),
// or node-wide (TestPullCredentials, TestEnsureImageTriesEachCredential,
// TestEnsureImageCredentialProviders).
//
// An image already present is used under IfNotPresent or Never only if the
// pod may (image.go, the kubelet's KubeletEnsureSecretPulledImages): the
// subpackage pullrecords keeps, under Config.PulledImages.Dir, a record of
// every pull ensureImage makes and the credential it succeeded with (a
// secret's coordinates and hash, a service account's coordinates, or
// node-wide), and
// decides from it and the policy; a pod refused pulls again with its own
// credentials, or under Never gets ErrImageNeverPull
// (TestEnsureImagePrivateImagePresent).
//
// Image volumes (imagevolumes.go, the kubelet's getImageVolumes and
// toKubeContainerImageVolumes): when a sync starts a container, the images
// of the pod's image volumes are made available after the sandbox and
// before the first container, through the same ensure as container images
// (pull policy, pull secrets, the records of pulled images, events on the
// pod); a container is created only with every image volume it mounts
// (else it waits with the pull's reason, ErrImagePull then
// ImagePullBackOff, or ErrImageNeverPull), the images' specs going to
// GenerateRunContainerOptions for the runtime's image mounts
// (TestSyncPodImageVolume, TestSyncPodImageVolumePrivateImage).
// ContainerImages counts the images a container mounts as in use.
//
// Whose objects: a Runtime owns the sandboxes and containers that match
// OwnedSelector(Config.Node). A single-node crivk (Node empty) owns every
// object labelled io.crivk.managed-by=crivk, as before, those of earlier
// versions included. A node of a multi-node crivk (docs/scale.md) writes
// LabelNode on everything it creates and owns only what carries its name:
// Snapshot and ListPods (the PLEG's relist and housekeeping's orphans),
// GetPodStatus, ContainerGC, RotateLogs and the dead log link sweep
// select it, so a node's housekeeping never sees nor touches another
// node's sandbox (TestNodeScopedListings, TestDeadLogSymlinkOfAnotherNode).
// ContainerImages alone lists the whole runtime: an image any container
// uses is in use.
//
// What this package must never do: talk to the Kubernetes API (the
// credential providers it is given read service accounts and request
// tokens through the node's functions, which it never sees), keep a map
// of pods, or block on anything but the runtime and, for a pull's
// credentials, the credential provider plugins (each bounded by its
// timeout).
package cri
