// Package healthz is crivk's health endpoint: /healthz on a plain-HTTP
// listener of its own (--healthz-bind-address, default 127.0.0.1, and
// --healthz-port, default 10248), as the kubelet's. It exists for the
// liveness probe of crivk's own pod (charts/crivk): the node API on
// --port answers 401 to a caller without credentials, so a probe cannot
// use it, and a restart should follow only from a state a restart can
// mend.
//
// # What /healthz says
//
// GET /healthz runs every check, in the order they were set, and answers
// 200 "ok" when all pass, or 500 with one line per check ("[+]name ok",
// "[-]name failed: reason") and "healthz check failed". With ?verbose the
// lines are written on success too. /healthz/<name> runs one check. The
// listener is meant for the host's loopback: the reasons are not withheld.
//
// crivk sets three checks (cmd/crivk):
//
//   - apiserver (Contact): the API server answered one of crivk's requests
//     (any HTTP status but 401) within DefaultContactBound. The node Lease
//     is renewed every 10 s through the same clients, so a working
//     connection answers several times a minute.
//   - runtime: the PLEG relisted the CRI runtime successfully within its
//     threshold (lifecycle.PLEG.Healthy, the kubelet's 3 minutes).
//   - syncloop (SyncLoopCheck): the engine's sync loop began an iteration within
//     max(2 × the resync interval, 5 minutes), the kubelet's syncloop
//     check over lifecycle.Engine.LatestLoopEntryTime.
//
// # Starting
//
// A check whose function is not set yet is pending and passes, reported
// "ok (not started)", as the kubelet's syncloop check passes before its
// loop first runs; Contact and SyncLoop likewise pass until they started.
// crivk serves /healthz before it connects to anything, so a probe is
// answered, and passes, while crivk waits for its runtime at start; a
// runtime that goes away later fails the runtime check after the PLEG's
// threshold.
//
// # What it must never do
//
// It never calls the API server or the runtime itself: a check reads
// what the loops recorded (a timestamp), so a probe costs nothing and
// cannot hang. It imports nothing of crivk's.
package healthz
