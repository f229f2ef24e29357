// Package crilog reads a container's log file as `kubectl logs` shows it,
// with the kubelet's semantics (its reader is k8s.io/cri-client/pkg/logs;
// this is crivk's own, without that module's dependencies).
//
// The runtime writes one file per container attempt, one record a line:
//
//	2016-10-06T00:17:09.669794202Z stdout P first half of a long line,
//	2016-10-06T00:17:09.669794203Z stdout F  second half
//	2016-10-06T00:17:09.669794210Z stderr F an error
//
// (RFC 3339 timestamp, stream, tag, content; tag P marks a partial line
// whose newline the runtime did not see, F a full one). Partial records
// are written without their newline, so they join with what follows. The
// old Docker JSON format ({"log":..., "stream":..., "time":...}) is read
// too; the format is chosen by the first line.
//
// ReadLogs carries out the options of v1.PodLogOptions (NewOptions):
//
//   - TailLines: start that many lines (records) before the end, found by
//     reading the file backwards; without Follow, stop after them;
//   - Since: skip records older than it;
//   - LimitBytes: stop once that many bytes are written (timestamps
//     included), cutting the last record;
//   - Timestamps: prefix each line (not the continuation of a partial
//     record) with its timestamp;
//   - Follow: at the end of the file, wait for writes (fsnotify on the
//     directory, and a check every second), follow a rotation to the new
//     file (the kubelet's rotation renames the file and has the runtime
//     reopen it), and stop at the end of the file once the container is no
//     longer running (CRI ContainerStatus).
//
// Only the current file is read, as the kubelet's ReadLogs: the rotated
// files (<log>.<timestamp>) and their compressed copies (.gz, made at the
// next rotation by cri/logrotate.go) never are. A follow that is draining
// a file just rotated keeps it open, and the compression waits for the
// rotation after, so the reader never sees it change under it.
//
// What it must never do: write to the log file or its directory, or keep
// anything open after ReadLogs returns.
package crilog
