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
//	        liveness Success, startup Unknown), none if the container
//	        ran before crivk started (a started sidecar: startup Success)
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
// A crivk restart changes no container's started or ready flag, as the
// kubelet's with ChangeContainerStatusOnKubeletRestart off (its default):
// a container that started more than 10 s before the Manager was made
// (RanBeforeStart, the kubelet's kubeletRestartGracePeriod) gets no
// initial result, so status generation (status.probedState) keeps what the
// API says until a probe settles one: started if the API's status of that
// container says so (its startup worker then never probes it), ready if
// the pod is Ready in the API (the pod object's status; a static pod's is
// its mirror pod's). A restartable init container (sidecar) the status
// says started gets startup Success at once, which the plan's gate on the
// containers after it reads. A container started after crivk starts waits
// for its probes as ever.
//
// Cost: one goroutine per worker, woken by its ticker; a probe runs inside
// that goroutine with its timeout, so at most one exec session, HTTP request
// or connection per worker is open at a time and none outlives its timeout.
//
// The package never talks to the Kubernetes API; events go to the
// EventRecorder it is given, metrics to the Metrics it is given.
package prober
