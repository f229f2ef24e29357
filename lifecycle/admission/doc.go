// Package admission decides, before anything of a pod is started, whether
// the node may run it: the kubelet's admission (pkg/kubelet/lifecycle
// predicate.go and the scheduler's AdmissionCheck it calls), with its
// reasons and messages.
//
// Who calls what: the engine calls Admit once for each pod it is handed
// for the first time, with the node as the API has it (labels, taints,
// allocatable) and the pods that still hold resources on the node (running
// or terminating, not yet finished). A rejected pod is never given to the
// pod workers: the engine records a Warning event with the reason and
// message and publishes the pod Failed with that reason and the message
// "Pod was rejected: <message>", as the kubelet's rejectPod.
//
// The checks, in the kubelet's order; the first failure is the answer:
//
//  1. the pod's kubernetes.io/os label and the node's OS   PodOSSelectorNodeLabelDoesNotMatch
//  2. spec.os.name and the node's OS                        PodOSNotSupported
//  3. supplementalGroupsPolicy Strict on a node whose
//     status.features does not support it (crivk's never
//     does: containerd 1.6 reports no features)             SupplementalGroupsPolicyNotSupported
//  4. resources against allocatable minus the requests of
//     the pods holding resources (overhead included): pods,
//     cpu, memory, ephemeral-storage, extended resources    OutOfpods, OutOfcpu, OutOfmemory, ...
//  5. nodeSelector and required node affinity               NodeAffinity
//  6. spec.nodeName                                         NodeName
//  7. host ports in use                                     NodePorts
//  8. NoExecute taints not tolerated                        TaintToleration
//
// A node of a multi-node crivk (docs/scale.md) adds one check after the
// predicates, through lifecycle.Config.Host (internal/fleet.HostPorts): a
// host port held by a pod of another node of the process on the same
// machine, or by one of the process' own listeners (a node API port,
// /healthz, profiling), by the same rule as check 7 (PortClash), refused
// with reason NodePorts and the kubelet's message followed by the port and
// its holder (PortUsedOnHost, PortUsedBy).
//
// The sysctl allowlist (Sysctls.Admit, reason SysctlForbidden) runs before
// them and AppArmor (AppArmor.Admit) after them, as the kubelet orders its
// admit handlers: a pending pod asking for an AppArmor profile other than
// Unconfined (pod or container securityContext.appArmorProfile, or the
// deprecated container.apparmor.security.beta.kubernetes.io/<container>
// annotations) on a host whose kernel does not enforce AppArmor is
// rejected with reason AppArmor and "Cannot enforce AppArmor: AppArmor is
// not enabled on the host". This is one of the places that keep the
// promise "a pod that asks for confinement never runs without it"
// (docs/security.md lists them all); TestAppArmorAdmit and the engine's
// TestEngineRejectsUnenforceableAppArmor prove it. The host is probed once
// per process (HostAppArmor); the rule itself takes the fact injected.
//
// Precheck (checks 1-3) and Filter (checks 4-8, every failure kept, as the
// kubelet's generalFilter) split Admit for the critical pod admission (the
// kubelet's preemption package): a pod that IsCritical (static, mirror, or
// priority 2*10^9 or more) and refused by Filter only for resources
// (Insufficient) is not rejected; the engine evicts PodsToPreempt (the
// kubelet's getPodsToPreempt: pods it may preempt, Preemptable; guaranteed
// spared most, then burstable; the fewest pods, nearest to the need, the
// smaller on a tie) and admits it (lifecycle/preempt.go). A critical pod
// refused for another reason too gets the first such reason. TestFilterKeepsEveryFailure,
// TestPodsToPreempt and the engine's TestEngineCriticalPodPreemption prove it.
//
// The rules are pure: no I/O, no clock, no state (the host probes,
// NewSysctls and AppArmorEnabled, are apart from them).
package admission
