package stats

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// procStats are a cgroup's processes' figures cAdvisor reads from /proc
// (container/libcontainer processStatsFromProcs).
type procStats struct {
	// fds counts the entries of /proc/<pid>/fd of every process, sockets
	// those that link to a socket.
	fds, sockets uint64
	// maxOpenFiles is the root process's soft "Max open files" of
	// /proc/<pid>/limits (-1: unlimited); nil without a root process or
	// when it cannot be read.
	maxOpenFiles *int64
}

// readProcStats reads the fds and sockets of pids and the open-file limit
// of rootPid (0: none) under procRoot. A process gone meanwhile counts
// nothing, as in cAdvisor.
func readProcStats(procRoot string, pids []int, rootPid int) procStats {
	var s procStats
	for _, pid := range pids {
		dir := filepath.Join(procRoot, strconv.Itoa(pid), "fd")
		fds, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		s.fds += uint64(len(fds))
		for _, fd := range fds {
			if link, err := os.Readlink(filepath.Join(dir, fd.Name())); err == nil && strings.HasPrefix(link, "socket") {
				s.sockets++
			}
		}
	}
	if rootPid > 0 {
		s.maxOpenFiles = readMaxOpenFiles(filepath.Join(procRoot, strconv.Itoa(rootPid), "limits"))
	}
	return s
}

// readMaxOpenFiles reads the soft limit of the "Max open files" line of a
// /proc/<pid>/limits: soft, hard, unit.
func readMaxOpenFiles(path string) *int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	for _, line := range strings.Split(string(b), "\n") {
		rest, ok := strings.CutPrefix(line, "Max open files")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 3 {
			return nil
		}
		if f[0] == "unlimited" {
			v := int64(-1)
			return &v
		}
		v, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return nil
		}
		return &v
	}
	return nil
}

// netIface is one interface's counters of /proc/<pid>/net/dev.
type netIface struct {
	name                                    string
	rxBytes, rxPackets, rxErrors, rxDropped uint64
	txBytes, txPackets, txErrors, txDropped uint64
}

// readNetDev reads the interfaces of pid's network namespace, without
// those cAdvisor ignores (names starting with lo, veth, docker or
// nerdctl), in the file's order.
func readNetDev(procRoot string, pid int) ([]netIface, error) {
	path := filepath.Join(procRoot, strconv.Itoa(pid), "net", "dev")
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []netIface
	sc := bufio.NewScanner(f)
	for line := 0; sc.Scan(); line++ {
		if line < 2 {
			continue // the two header lines
		}
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			return nil, fmt.Errorf("%s: line %d has no interface", path, line+1)
		}
		name = strings.TrimSpace(name)
		if ignoredInterface(name) {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) < 12 {
			return nil, fmt.Errorf("%s: interface %s has %d fields", path, name, len(fields))
		}
		var v [12]uint64
		for i := range v {
			if v[i], err = strconv.ParseUint(fields[i], 10, 64); err != nil {
				return nil, fmt.Errorf("%s: interface %s: %w", path, name, err)
			}
		}
		// Receive: bytes packets errs drop fifo frame compressed
		// multicast; transmit: bytes packets errs drop ...
		out = append(out, netIface{name: name, rxBytes: v[0], rxPackets: v[1], rxErrors: v[2], rxDropped: v[3],
			txBytes: v[8], txPackets: v[9], txErrors: v[10], txDropped: v[11]})
	}
	return out, sc.Err()
}

func ignoredInterface(name string) bool {
	name = strings.ToLower(name)
	for _, p := range []string{"lo", "veth", "docker", "nerdctl"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}
