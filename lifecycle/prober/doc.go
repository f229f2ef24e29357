// Package prober runs the liveness, readiness and startup probes of the
// node's containers, as the kubelet's pkg/kubelet/prober does, and keeps
// their latest results.
//
// Who calls what:
//
//	Engine ──AddPod(pod) at every sync──────────> Manager
//	Engine ──RemovePod(uid) terminating/forget──> Manager ──stop──> workers
//	                                                 │ one worker (goroutine +
//	                                                 │ ticker) per container and
//	                                                 │ probe type
//	  worker ──Status(uid) (the published status)────┘
//	  worker ──probe: exec (Runtime.ExecSync), httpGet, tcpSocket, grpc
//	  worker ──Set(containerID, result)──> results ──OnChange(Update)──> Engine
//	                                                   readiness/startup: republish
//	                                                   the status at once;
//	                                                   liveness/startup failure:
//	                                                   kick the pod's worker, which
//	                                                   kills the container
//	status.Generate, the plan ──Result(type, containerID)──> Manager
//
// A worker's state machine (one per container name and probe type; a new
// container ID resets it):
//
//	        new container ID: result := initial (readiness Failure,
//	        liveness Success, startup Unknown) unless already known
//	              │
//	              v
//	┌──────> waiting ── not running / not started (startup gate) /
//	│           │        before initialDelaySeconds ──> (tick)
//	│           v
//	│        probing ── result ──> run of equal results counted;
//	│           │         successThreshold successes or failureThreshold
//	│           │         failures in a row: Set(result)
//	│           v
//	│   liveness/startup Failure set ──> on hold (no probing) until the
//	└──────────────── container ID changes (the engine restarted it)
//
//	stopped: pod terminal, container terminated with restartPolicy
//	Never, RemovePod, or the manager's context ends
//
// The kubelet's rules it follows: a readiness result is Failure until a
// probe succeeds; startup gates liveness and readiness (they do not run
// until the container is started) and stops once it succeeded; probes start
// after initialDelaySeconds counted from the container's start; errors of
// the prober itself (a port name that does not exist) are thrown away, not
// counted. Only readiness is probed out of its period: at each sync for a
// started container that is not ready, and at once when the container's
// startup probe succeeds (a manual run restarts the worker's period);
// liveness and startup probe on their period only, so a container gets
// failureThreshold × periodSeconds however often its pod is synced.
// Results survive a crivk restart through the API status: AddPod seeds
// readiness Success for a container the API says is ready and startup
// Success for one it says is started, so a ready container stays ready
// until a probe says otherwise.
//
// Cost: one goroutine per worker, woken by its ticker; a probe runs inside
// that goroutine with its timeout, so at most one exec session, HTTP request
// or connection per worker is open at a time and none outlives its timeout.
//
// The package never talks to the Kubernetes API; events go to the
// EventRecorder it is given, metrics to the Metrics it is given.
package prober
