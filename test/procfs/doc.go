// Package procfs parses the Linux /proc files the benchmarks measure
// processes and the machine with, so test/bench and test/benchfleet read
// CPU time and memory the same way.
//
// It owns:
//
//   - the parsers, pure functions of a file's content: ParseStatCPU
//     (utime+stime of /proc/<pid>/stat), ParseStat (the fields the CPU
//     attribution of test/bench needs from the same line), ParseStatusRSS
//     and ParseKBField (the "<key> <n> kB" lines of /proc/<pid>/status and
//     /proc/meminfo), ParseMachineCPU (/proc/stat's "cpu" line);
//   - the readers of one process, which open /proc/<pid>/... and call a
//     parser: ProcessCPU (seconds), ProcessRSS and ProcessRSSFile (bytes);
//   - ReadPID, for the PID files hack/local-up.sh writes.
//
// Times in /proc are clock ticks (ClockTicks a second). A caller decides
// what a missing process means (test/bench reports the error,
// test/benchfleet counts it as nothing); procfs never retries, caches or
// logs. It is test code: product packages must never import it.
package procfs
