package lifecycle

import "fmt"

// WorkerState is where a pod's worker is in its life. The transitions:
//
//	Syncing ──(phase Succeeded/Failed)──> Finished
//	   │                                     │
//	   └────────(Kill: pod deleted)──────────┴──> Terminating ──> Terminated
//
// Syncing runs the pod per its spec. Finished stops the sandbox, keeps the
// containers (and their logs) and makes no more plans. Terminating stops the
// containers with the effective grace period, retried until the runtime
// confirms; a Kill with a shorter grace period cancels the attempt in flight
// and starts again with it. Terminated: containers and sandbox removed, final
// status published, the provider told; the worker is gone.
type WorkerState int

const (
	WorkerSyncing WorkerState = iota
	WorkerFinished
	WorkerTerminating
	WorkerTerminated
)

func (s WorkerState) String() string {
	switch s {
	case WorkerSyncing:
		return "Syncing"
	case WorkerFinished:
		return "Finished"
	case WorkerTerminating:
		return "Terminating"
	case WorkerTerminated:
		return "Terminated"
	default:
		return fmt.Sprintf("WorkerState(%d)", int(s))
	}
}

// transitions lists every allowed transition; canTransition is the only
// place that reads it.
var transitions = map[WorkerState][]WorkerState{
	WorkerSyncing:     {WorkerFinished, WorkerTerminating},
	WorkerFinished:    {WorkerTerminating},
	WorkerTerminating: {WorkerTerminated},
}

func canTransition(from, to WorkerState) bool {
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}
