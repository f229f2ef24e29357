package main

import "github.com/crivk/crivk/test/procfs"

// procSample is the CPU time (seconds) and VmRSS (bytes) of a set of
// processes at one moment; a process that is gone counts nothing.
type procSample struct {
	CPU float64
	RSS uint64
}

// sampleProcs sums CPU and RSS over pids.
func sampleProcs(pids []int) procSample {
	var s procSample
	for _, pid := range pids {
		if c, err := procfs.ProcessCPU(pid); err == nil {
			s.CPU += c
		}
		if r, err := procfs.ProcessRSS(pid); err == nil {
			s.RSS += r
		}
	}
	return s
}
