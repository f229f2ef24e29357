package cri

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"

	"github.com/crivk/crivk/cri/crilog"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The kubelet's limits on a termination message (pkg/kubelet/container).
const (
	// MaxTerminationMessageLength is how much of the termination message
	// file is read: its last 4096 bytes.
	MaxTerminationMessageLength = 4096
	// With FallbackToLogsOnError, at most the last 80 lines and 2048 bytes
	// of the log make the message.
	maxTerminationMessageLogLines  = 80
	maxTerminationMessageLogLength = 2048
)

// terminationMessage is the message of an exited container, the kubelet's
// getTerminationMessage: the tail of the file mounted at the container's
// terminationMessagePath (annotations record the path and policy); with
// FallbackToLogsOnError and a failed container whose file is empty, the
// tail of its log.
func (r *Runtime) terminationMessage(ctx context.Context, s *runtimeapi.ContainerStatus, annotations map[string]string) string {
	path := annotations[AnnotationTerminationMessagePath]
	fallback := annotations[AnnotationTerminationMessagePolicy] == string(v1.TerminationMessageFallbackToLogsOnError) &&
		s.GetExitCode() != 0 && s.GetReason() != "ContainerCannotRun"
	msg, checkLogs := readTerminationFile(s, path, fallback)
	if checkLogs && s.GetLogPath() != "" {
		msg = r.logTail(ctx, s.GetLogPath())
	}
	return msg
}

// readTerminationFile reads the file mounted at path; checkLogs says the
// log is to be read instead.
func readTerminationFile(s *runtimeapi.ContainerStatus, path string, fallback bool) (msg string, checkLogs bool) {
	if path == "" {
		return "", fallback
	}
	for _, m := range s.GetMounts() {
		if m.GetContainerPath() != path {
			continue
		}
		data, err := readTail(m.GetHostPath(), MaxTerminationMessageLength)
		if err != nil {
			if os.IsNotExist(err) {
				return "", fallback
			}
			return fmt.Sprintf("Error on reading termination log %s: %v", m.GetHostPath(), err), false
		}
		return string(data), fallback && len(data) == 0
	}
	return "", fallback
}

// readTail returns at most the last max bytes of the file at path.
func readTail(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() > max {
		if _, err := f.Seek(fi.Size()-max, io.SeekStart); err != nil {
			return nil, err
		}
	}
	return io.ReadAll(io.LimitReader(f, max))
}

// logTail is the last lines of a container's CRI log, as the kubelet's
// readLastStringFromContainerLogs: at most 80 lines, of which the last
// 2048 bytes.
func (r *Runtime) logTail(ctx context.Context, path string) string {
	opts := crilog.Options{TailLines: maxTerminationMessageLogLines, LimitBytes: -1}
	var buf bytes.Buffer
	if err := (crilog.Reader{}).ReadLogs(ctx, path, "", opts, &buf, &buf); err != nil {
		return fmt.Sprintf("Error on reading termination message from logs: %v", err)
	}
	b := buf.Bytes()
	if len(b) > maxTerminationMessageLogLength {
		b = b[len(b)-maxTerminationMessageLogLength:]
	}
	return string(b)
}
