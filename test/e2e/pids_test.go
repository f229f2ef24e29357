package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// TestPodPidsLimit restarts crivk with --pod-max-pids=20 and runs a pod
// whose shell starts 40 background sleeps in a subshell. It shows, on the
// host's cgroup files and through the API server:
//   - the pod cgroup's pids.max is 20, and kubepods' is the node's pid
//     capacity, min(kernel.pid_max, kernel.threads-max), as the kubelet's
//     node allocatable cgroup (no pid reservation in the local cluster);
//   - the pod cannot go past 20: a fork fails (busybox's "can't fork" in
//     the log, fewer than 40 sleeps started, the pids controller's own
//     count of refused forks, pids.events "max", above 0) and pids.current
//     is at most 20;
//   - /stats/summary (node proxy) reports the pod's process_count: the
//     processes of its container, that is the pod cgroup's pids.current
//     less the sandbox's pause process.
func TestPodPidsLimit(t *testing.T) {
	const limit, attempts = 20, 40
	// crivk may have just been started (this test may run first): a
	// SIGTERM before its signal handler is set would kill it uncleanly.
	waitCrivkServing(t)
	t.Cleanup(func() { waitCrivkServing(t) })
	withCrivkFlags(t, nil, nil, "--pod-max-pids="+strconv.Itoa(limit))
	waitNodeReady(t, v1.ConditionTrue, 60*time.Second)
	ns := newNamespace(t)
	// The subshell dies at the first fork that fails (ash raises an
	// error); the shell then execs its last sleep, with no fork.
	script := `( i=0; while [ $i -lt ` + strconv.Itoa(attempts) + ` ]; do sleep 3600 & i=$((i+1)); echo "started $i"; done; echo "loop ended" ) 2>&1; ` +
		`echo "forker exited"; exec sleep 3600`
	p := runningPod(t, ns, busyboxPod("forker", v1.RestartPolicyNever, script))
	dirs := podCgroupDirs(p.Status.QOSClass, p.UID)

	// (a) The pod cgroup's pids.max, and kubepods'.
	if got := readCgroup(t, dirs["pids"], "pids.max"); got != strconv.Itoa(limit) {
		t.Errorf("%s/pids.max = %q, want %d", dirs["pids"], got, limit)
	}
	_, maxPID, _ := procPIDAvailable(t)
	kubepods := "/sys/fs/cgroup/pids" + cgroupRoot() + "/kubepods"
	if got := readCgroup(t, kubepods, "pids.max"); got != strconv.FormatInt(maxPID, 10) {
		t.Errorf("%s/pids.max = %q, want the node's pid capacity %d", kubepods, got, maxPID)
	}

	// (b) The forks past the limit fail.
	var logs string
	err := wait.PollUntilContextTimeout(context.Background(), poll, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		out, err := podLogs(ctx, ns, p.Name, &v1.PodLogOptions{Container: "c"})
		logs = out
		return err == nil && strings.Contains(out, "forker exited"), nil
	})
	if err != nil {
		t.Fatalf("the forking subshell never ended: %v; log:\n%s", err, logs)
	}
	started := strings.Count(logs, "started ")
	if !strings.Contains(logs, "can't fork") || strings.Contains(logs, "loop ended") || started >= attempts {
		t.Errorf("started %d of %d sleeps, want a failed fork (\"can't fork\") before the loop ended; log:\n%s", started, attempts, logs)
	}
	// cgroup v1 counts a refused fork in the pids.events of the forking
	// task's cgroup (the container's, below the pod's), newer kernels
	// up the hierarchy too: the pod's and its children's are summed.
	refused := 0
	eventFiles, _ := filepath.Glob(filepath.Join(dirs["pids"], "*", "pids.events"))
	for _, f := range append(eventFiles, filepath.Join(dirs["pids"], "pids.events")) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Errorf("reading %s: %v", f, err)
			continue
		}
		n, err := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(string(b)), "max "))
		if err != nil {
			t.Errorf("%s = %q, not \"max N\"", f, b)
		}
		refused += n
	}
	if refused == 0 {
		t.Errorf("no fork refused at pids.max in the pids.events below %s", dirs["pids"])
	}
	current, err := strconv.Atoi(readCgroup(t, dirs["pids"], "pids.current"))
	if err != nil || current > limit {
		t.Errorf("%s/pids.current = %d (%v), want at most %d", dirs["pids"], current, err, limit)
	}
	t.Logf("pids.max %d: %d of %d sleeps started before a fork failed; pids.current %d, %d fork(s) refused (pids.events)", limit, started, attempts, current, refused)

	// (c) The summary's count: the container's processes (the shell,
	// now exec'd into sleep, and the sleeps), the pod cgroup's tasks
	// less pause.
	var count uint64
	var seen bool
	err = wait.PollUntilContextTimeout(context.Background(), poll, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		cur, err := strconv.Atoi(readCgroup(t, dirs["pids"], "pids.current"))
		if err != nil {
			return false, nil
		}
		for _, ps := range nodeSummary(t).Pods {
			if ps.PodRef.UID == string(p.UID) && ps.ProcessStats != nil && ps.ProcessStats.ProcessCount != nil {
				count, seen, current = *ps.ProcessStats.ProcessCount, true, cur
				return count == uint64(cur-1), nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("/stats/summary process_count of the pod = %d (reported: %v), want pids.current %d less pause", count, seen, current)
	}
	if count != uint64(started+1) {
		t.Errorf("process_count %d, want the %d sleeps started and the shell", count, started)
	}
	t.Logf("/stats/summary: process_count %d (pids.current %d with pause)", count, current)
}
