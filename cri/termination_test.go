package cri

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestTerminationMessage(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o666); err != nil {
			t.Fatal(err)
		}
		return p
	}
	long := strings.Repeat("a", 100) + strings.Repeat("b", MaxTerminationMessageLength)
	var logLines strings.Builder
	for i := 0; i < 100; i++ {
		logLines.WriteString("2024-01-01T00:00:00.000000000Z stdout F line " + strings.Repeat("x", 30) + "\n")
	}
	logLines.WriteString("2024-01-01T00:00:00.000000000Z stderr F last words\n")
	logPath := write("0.log", logLines.String())
	shortLog := write("1.log", "2024-01-01T00:00:00.000000000Z stdout P part-\n2024-01-01T00:00:00.000000000Z stdout F one\n")

	tests := []struct {
		name     string
		file     string // content of the termination file; "-" means no file
		mountAt  string
		policy   string
		exitCode int32
		log      string
		want     string
		wantSub  string
	}{
		{name: "file content", file: "DONE", mountAt: "/dev/termination-log", want: "DONE"},
		{name: "last 4096 bytes of a long file", file: long, mountAt: "/dev/termination-log", want: strings.Repeat("b", MaxTerminationMessageLength)},
		{name: "no file policy: empty", file: "", mountAt: "/dev/termination-log", exitCode: 1, log: logPath, want: ""},
		{name: "fallback to logs on error with an empty file", file: "", mountAt: "/dev/termination-log", policy: "FallbackToLogsOnError", exitCode: 1, log: shortLog, want: "part-one\n"},
		{name: "fallback keeps the file when it has content", file: "mine", mountAt: "/dev/termination-log", policy: "FallbackToLogsOnError", exitCode: 1, log: shortLog, want: "mine"},
		{name: "no fallback on success", file: "", mountAt: "/dev/termination-log", policy: "FallbackToLogsOnError", exitCode: 0, log: shortLog, want: ""},
		{name: "fallback without a mount", file: "-", policy: "FallbackToLogsOnError", exitCode: 2, log: shortLog, want: "part-one\n"},
		{name: "fallback is capped at 2048 bytes of the last 80 lines", file: "", mountAt: "/dev/termination-log", policy: "FallbackToLogsOnError", exitCode: 1, log: logPath, wantSub: "last words\n"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := &runtimeapi.ContainerStatus{ExitCode: tc.exitCode, LogPath: tc.log}
			if tc.file != "-" {
				p := write("term-"+string(rune('a'+i)), tc.file)
				st.Mounts = []*runtimeapi.Mount{{ContainerPath: "/other", HostPath: "/nonexistent"}, {ContainerPath: tc.mountAt, HostPath: p}}
			}
			ann := map[string]string{AnnotationTerminationMessagePath: "/dev/termination-log", AnnotationTerminationMessagePolicy: tc.policy}
			got := (&Runtime{}).terminationMessage(context.Background(), st, ann)
			if tc.wantSub != "" {
				if len(got) > maxTerminationMessageLogLength || !strings.HasSuffix(got, tc.wantSub) {
					t.Errorf("message of %d bytes ending %q, want at most %d ending %q", len(got), got[max(0, len(got)-20):], maxTerminationMessageLogLength, tc.wantSub)
				}
				return
			}
			if got != tc.want {
				t.Errorf("message %q, want %q", got, tc.want)
			}
		})
	}
}
