package kubeletconfig

import (
	"flag"
	"io"
	"path/filepath"
	"testing"
	"time"
)

// TestMaxContainerRestartPeriod: crashLoopBackOff.maxContainerRestartPeriod
// sets --max-container-restart-period, unless the command line gives it,
// and Effective reads it back.
func TestMaxContainerRestartPeriod(t *testing.T) {
	for name, tt := range map[string]struct {
		file string
		args []string
		want time.Duration
	}{
		"from the file":               {file: "crashLoopBackOff: {maxContainerRestartPeriod: 1s}\n", want: time.Second},
		"the command line wins":       {file: "crashLoopBackOff: {maxContainerRestartPeriod: 1s}\n", args: []string{"--max-container-restart-period=30s"}, want: 30 * time.Second},
		"omitted: the flag's default": {file: "maxPods: 20\n", want: 300 * time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			dir := writeFiles(t, map[string]string{"k.yaml": header + tt.file})
			fs := flag.NewFlagSet("crivk", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			var got time.Duration
			fs.DurationVar(&got, "max-container-restart-period", 300*time.Second, "")
			fs.Int64("max-pods", 110, "")
			files := AddFlags(fs)
			if err := fs.Parse(append([]string{"--config", filepath.Join(dir, "k.yaml")}, tt.args...)); err != nil {
				t.Fatal(err)
			}
			if err := files.Apply(); err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("--max-container-restart-period = %s, want %s", got, tt.want)
			}
			if e := files.Effective().CrashLoopBackOff.MaxContainerRestartPeriod; e == nil || e.Duration != tt.want {
				t.Errorf("Effective crashLoopBackOff.maxContainerRestartPeriod = %v, want %s", e, tt.want)
			}
		})
	}
}
