package cm

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// MaxPID is the node's pid capacity, as the kubelet's container manager
// reads it (pkg/kubelet/stats/pidlimit) into its internal capacity "pid":
// the smaller of kernel.pid_max and kernel.threads-max. It is not on the
// Node's capacity; less the pid reservations (--system-reserved and
// --kube-reserved pid=N), it is the kubepods cgroup's pids.max
// (Config.PodsPIDs). procRoot is /proc but in tests.
func MaxPID(procRoot string) (int64, error) {
	var errs []error
	limit := int64(-1)
	for _, f := range []string{"sys/kernel/pid_max", "sys/kernel/threads-max"} {
		b, err := os.ReadFile(filepath.Join(procRoot, f))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if limit < 0 || v < limit {
			limit = v
		}
	}
	if limit < 0 {
		return 0, errors.Join(errs...)
	}
	return limit, nil
}
