package main

import (
	"bufio"
	"os"
	"runtime"
	"strings"

	"github.com/crivk/crivk/test/procfs"
)

// Machine describes where the figures were taken.
type Machine struct {
	CPUModel string  `json:"cpuModel"`
	CPUs     int     `json:"cpus"`
	MemGiB   float64 `json:"memGiB"`
	Kernel   string  `json:"kernel"`
	OS       string  `json:"os"`
}

func machine() Machine {
	m := Machine{CPUs: runtime.NumCPU()}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		if r, err := procfs.ParseKBField(b, "MemTotal:"); err == nil {
			m.MemGiB = float64(r) / (1 << 30)
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/etc/os-release"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
				m.OS = strings.Trim(v, `"`)
			}
		}
	}
	return m
}
