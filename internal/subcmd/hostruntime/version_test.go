package hostruntime

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestParseContainerdVersion: the third word of `containerd --version`, as
// containerd's own builds, Debian's and Docker's packages print it.
func TestParseContainerdVersion(t *testing.T) {
	for _, c := range []struct {
		out  string
		want ContainerdVersion
		err  string
	}{
		{out: "containerd github.com/containerd/containerd/v2 v2.4.2 \n", want: ContainerdVersion{2, 4, 2}},
		{out: "containerd github.com/containerd/containerd/v2 v2.4.2 b2f3ce1a2b1e3b4c\n", want: ContainerdVersion{2, 4, 2}},
		{out: "containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3\n", want: ContainerdVersion{1, 6, 20}},
		{out: "containerd containerd.io 1.7.27 05044ec0a9a75232cad458027ca83437aae3f4da", want: ContainerdVersion{1, 7, 27}},
		{out: "containerd github.com/containerd/containerd/v2 v2.1.0-rc.1 abc", want: ContainerdVersion{2, 1, 0}},
		{out: "containerd github.com/k3s-io/containerd v1.7.23-k3s2", want: ContainerdVersion{1, 7, 23}},
		{out: "containerd example v2.3", want: ContainerdVersion{2, 3, 0}},
		{out: "", err: "not the output of containerd --version"},
		{out: "runc version 1.5.3", err: "not the output of containerd --version"},
		{out: "containerd github.com/containerd/containerd", err: "not the output"},
		{out: "containerd github.com/containerd/containerd dev", err: `"dev" is not a version`},
	} {
		got, err := ParseContainerdVersion(c.out)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: %v, error %v, want an error with %q", c.out, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q: %v, %v; want %v", c.out, got, err, c.want)
		}
	}
	for s, want := range map[string]ContainerdVersion{"2.4.2": {2, 4, 2}, "v1.6": {1, 6, 0}, "1.7.0": {1, 7, 0}} {
		if got, err := ParseVersionFlag(s); err != nil || got != want {
			t.Errorf("ParseVersionFlag(%q): %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"", "2", "2.x", "2.4.2 x", "containerd 2.4"} {
		if got, err := ParseVersionFlag(s); err == nil {
			t.Errorf("ParseVersionFlag(%q): %v, no error", s, got)
		}
	}
}

// TestConfigVersion: 1.6 and 1.7 get version 2, 2.3 and newer 2.x version
// 4; older, 2.0 to 2.2 (which read version 3 at most) and a major version
// after 2 are refused, with the version found and the ones supported.
func TestConfigVersion(t *testing.T) {
	for _, c := range []struct {
		v    ContainerdVersion
		want int
		err  string
	}{
		{v: ContainerdVersion{}, err: "not known"},
		{v: ContainerdVersion{1, 5, 18}, err: "containerd 1.5.18 is too old"},
		{v: ContainerdVersion{1, 6, 0}, want: 2},
		{v: ContainerdVersion{1, 6, 20}, want: 2},
		{v: ContainerdVersion{1, 7, 30}, want: 2},
		{v: ContainerdVersion{2, 0, 5}, err: "containerd 2.0.5 reads config versions up to 3"},
		{v: ContainerdVersion{2, 2, 9}, err: "upgrade it to 2.3 or newer"},
		{v: ContainerdVersion{2, 3, 0}, want: 4},
		{v: ContainerdVersion{2, 4, 2}, want: 4},
		{v: ContainerdVersion{2, 11, 0}, want: 4},
		{v: ContainerdVersion{3, 0, 0}, err: "containerd 3.0.0 is newer than crivk knows"},
	} {
		got, err := c.v.configVersion()
		if c.err != "" {
			if !errors.Is(err, ErrUnsupportedContainerd) || !strings.Contains(err.Error(), c.err) ||
				!strings.Contains(err.Error(), "1.6, 1.7 and 2.3 or newer") {
				t.Errorf("%s: %d, error %v; want ErrUnsupportedContainerd with %q", c.v, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: %d, %v; want %d", c.v, got, err, c.want)
		}
	}
}

// TestVersionOf runs a fake containerd: its version, a failure with its
// stderr, output that is no version.
func TestVersionOf(t *testing.T) {
	dir := t.TempDir()
	script := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ok := script("ok", `[ "$1" = --version ] && echo "containerd github.com/containerd/containerd/v2 v2.4.2 "`)
	if v, err := versionOf(exec.Command(ok, "--version")); err != nil || v != (ContainerdVersion{2, 4, 2}) {
		t.Errorf("versionOf: %v, %v", v, err)
	}
	fails := script("fails", `echo "cannot run" >&2; exit 3`)
	if _, err := versionOf(exec.Command(fails, "--version")); err == nil || !strings.Contains(err.Error(), "cannot run") ||
		!strings.Contains(err.Error(), fails+" --version") {
		t.Errorf("versionOf of a failing binary: %v", err)
	}
	garbage := script("garbage", `echo hello`)
	if _, err := versionOf(exec.Command(garbage, "--version")); err == nil || !strings.Contains(err.Error(), "not the output of containerd --version") {
		t.Errorf("versionOf of another binary: %v", err)
	}
}
