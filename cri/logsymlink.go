package cri

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/virtual-kubelet/virtual-kubelet/log"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The container log links (the kubelet's "legacy" log symlinks,
// pkg/kubelet/kuberuntime/legacy.go): every started container gets
//
//	<ContainerLogsDir>/<pod>_<namespace>_<container>-<containerID>.log
//	  -> <PodLogDir>/<namespace>_<pod>_<uid>/<container>/<attempt>.log
//
// Log shippers (fluentd, fluent-bit, promtail) and the node e2e suite's
// ContainerLogPath spec read the containers' logs there. Their life:
//
//	startContainer: StartContainer ok ──> link made (only if the log file
//	                exists; a failure is logged, the container runs on)
//	removeContainer: link removed ──> RemoveContainer (a link that cannot
//	                be removed keeps the container, retried later)
//	ContainerGC:    links that dangle and whose container does not run
//	                (gone, exited) are removed: the containers removed
//	                with their sandbox or by someone else
//
// No link is made when Config.ContainerLogsDir is empty.

// logSymlinkSuffix is the kubelet's legacyLogSuffix.
const logSymlinkSuffix = ".log"

// maxFileNameLen is ext4's longest file name; the kubelet cuts the link's
// name to it (ext4MaxFileNameLen).
const maxFileNameLen = 255

// logSymlink is the kubelet's legacyLogSymlink: the link of container id
// of pod namespace/podName in dir, its name cut to 255 bytes.
func logSymlink(dir, podName, podNamespace, containerName, containerID string) string {
	name := podName + "_" + podNamespace + "_" + containerName + "-" + containerID
	if len(name) > maxFileNameLen-len(logSymlinkSuffix) {
		name = name[:maxFileNameLen-len(logSymlinkSuffix)]
	}
	return filepath.Join(dir, name+logSymlinkSuffix)
}

// containerIDOfLogSymlink is the kubelet's getContainerIDFromLegacyLogSymlink:
// the text after the last "-" without ".log", at least 6 characters (the
// runtime finds a container by a prefix that long).
func containerIDOfLogSymlink(path string) (string, error) {
	parts := strings.Split(path, "-")
	last := parts[len(parts)-1]
	if !strings.HasSuffix(last, logSymlinkSuffix) {
		return "", fmt.Errorf("%q doesn't end with %q", path, logSymlinkSuffix)
	}
	id := strings.TrimSuffix(last, logSymlinkSuffix)
	if len(id) < 6 {
		return "", fmt.Errorf("container Id %q is too short", id)
	}
	return id, nil
}

// containerLogSymlink is the link of container id of ref named name, or ""
// when links are off.
func (r *Runtime) containerLogSymlink(ref PodRef, name, id string) string {
	if r.cfg.ContainerLogsDir == "" {
		return ""
	}
	return logSymlink(r.cfg.ContainerLogsDir, ref.Name, ref.Namespace, name, id)
}

// linkContainerLog links the log of the just started container id, as the
// kubelet's startContainer does after StartContainer: only when the log
// file exists (a dangling link would only wait for the collector), and a
// failure is logged, never fails the start.
func (r *Runtime) linkContainerLog(ctx context.Context, sbCfg *runtimeapi.PodSandboxConfig, cfg *runtimeapi.ContainerConfig, id string) {
	if r.cfg.ContainerLogsDir == "" {
		return
	}
	meta := sbCfg.GetMetadata()
	link := logSymlink(r.cfg.ContainerLogsDir, meta.GetName(), meta.GetNamespace(), cfg.GetMetadata().GetName(), id)
	target := filepath.Join(sbCfg.GetLogDirectory(), cfg.GetLogPath())
	if _, err := os.Stat(target); os.IsNotExist(err) {
		return
	}
	if err := os.Symlink(target, link); err != nil {
		log.G(ctx).WithError(err).WithField("path", link).WithField("containerID", id).WithField("containerLogPath", target).
			Error("Failed to create legacy symbolic link")
	}
}

// unlinkContainerLog removes link ("" does nothing); a link already gone
// is done. The error names the container.
func unlinkContainerLog(id, link string) error {
	if link == "" {
		return nil
	}
	if err := os.Remove(link); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("failed to remove container %q log legacy symbolic link %q: %w", id, link, err)
	}
	return nil
}

// linkOfStatus is the link of the container the runtime reports as s,
// read from its labels as the kubelet's removeContainerLog reads them.
func (r *Runtime) linkOfStatus(s *runtimeapi.ContainerStatus) string {
	l := s.GetLabels()
	return r.containerLogSymlink(PodRef{Name: l[LabelPodName], Namespace: l[LabelPodNamespace]}, l[LabelContainerName], s.GetId())
}

// removeDeadLogSymlinks is the second half of the kubelet's
// evictPodLogsDirectories: every *.log link in ContainerLogsDir that
// dangles is removed unless its container still exists and has not
// exited (a running container's log is briefly missing while it is
// rotated). It returns how many it removed.
func (r *Runtime) removeDeadLogSymlinks(ctx context.Context) int {
	if r.cfg.ContainerLogsDir == "" {
		return 0
	}
	links, _ := filepath.Glob(filepath.Join(r.cfg.ContainerLogsDir, "*"+logSymlinkSuffix))
	removed := 0
	for _, link := range links {
		if _, err := os.Stat(link); !os.IsNotExist(err) {
			continue
		}
		if id, err := containerIDOfLogSymlink(link); err == nil {
			st, err := r.rs.ContainerStatus(ctx, id, false)
			if err != nil {
				log.G(ctx).WithError(err).WithField("containerID", id).Debug("container GC: no status of a log link's container")
			} else if st.GetStatus() == nil {
				continue
			} else if st.GetStatus().GetState() != runtimeapi.ContainerState_CONTAINER_EXITED {
				continue
			} else if r.cfg.Node != "" && !r.ownsLabels(st.GetStatus().GetLabels()) {
				// Another node's container: its node sweeps the link.
				continue
			}
		}
		if err := os.Remove(link); err != nil {
			log.G(ctx).WithError(err).WithField("path", link).Warn("container GC: removing a dead container log link failed")
			continue
		}
		removed++
	}
	return removed
}
