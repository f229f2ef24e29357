// Package taskevents talks to containerd's own APIs on the CRI socket for
// the two things the CRI does not offer:
//
//   - Waker subscribes to containerd's task events (/tasks/...) and turns
//     each into a wake of the PLEG, so that a container's exit or start is
//     relisted within milliseconds instead of at the next periodic relist.
//     A runtime without containerd's events API answers Unimplemented and
//     Run returns: the PLEG then relists every period only.
//   - Reaper kills and deletes a task that containerd's CRI plugin lost
//     track of (an interrupted StartContainer), the one repair the CRI
//     cannot make; cri.Runtime calls it (cri.Config.DeleteTask) only when
//     RemoveContainer fails with FailedPrecondition.
//
// # The caller's loop
//
// cmd/crivk makes a Reaper before connecting to the runtime and hands its
// DeleteTask to cri.Config, and runs Waker.Run for the agent's lifetime with
// the PLEG's wake channel (pleg.Config.Wake), both only for a
// unix:// CRI endpoint.
//
// # What it must never do
//
//   - Never decide anything about pods: a wake only makes the PLEG relist
//     sooner, and the relist (through the CRI) is the only source of truth.
//     A lost or extra event changes nothing but latency.
//   - Never import lifecycle: the PLEG is reached through a channel, the
//     runtime's removal path through a function value.
//   - Never touch a task outside the namespace it is given (k8s.io, the
//     CRI's).
package taskevents
