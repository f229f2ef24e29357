package hostruntime

import (
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
)

// ContainerdVersion is a containerd release, as `containerd --version`
// names it. The config.toml Files renders depends on it (configVersion).
type ContainerdVersion struct {
	Major, Minor, Patch int
}

func (v ContainerdVersion) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

func (v ContainerdVersion) less(major, minor int) bool {
	return v.Major < major || v.Major == major && v.Minor < minor
}

// ErrUnsupportedContainerd is returned (wrapped, with the version found and
// the versions crivk renders for) for a containerd crivk writes no config
// for.
var ErrUnsupportedContainerd = errors.New("unsupported containerd")

// configVersion is the version of the config.toml rendered for v:
//
//   - 1.6 and 1.7: version 2 (the CRI plugin is io.containerd.grpc.v1.cri,
//     registries in registry.mirrors and registry.configs).
//   - 2.3 and newer 2.x: version 4, the newest containerd 2 reads as it is
//     (2.4 writes it by default): the listeners are the
//     io.containerd.server.v1.* plugins, the CRI plugin is split in
//     io.containerd.cri.v1.runtime and io.containerd.cri.v1.images,
//     registries are hosts.toml files under registry.config_path.
//   - 2.0 to 2.2 read versions up to 3 only (they refuse 4: "expected
//     containerd config version equal to or less than `3`"), and older
//     than 1.6 or a major version after 2 are not known: an error wrapping
//     ErrUnsupportedContainerd.
func (v ContainerdVersion) configVersion() (int, error) {
	const supported = "crivk's runtime renders a config for containerd 1.6, 1.7 and 2.3 or newer 2.x"
	switch {
	case v.Major == 0:
		return 0, fmt.Errorf("%w: the containerd's version is not known; %s", ErrUnsupportedContainerd, supported)
	case v.less(1, 6):
		return 0, fmt.Errorf("%w: containerd %s is too old: %s", ErrUnsupportedContainerd, v, supported)
	case v.Major == 1:
		return 2, nil
	case v.Major == 2 && v.less(2, 3):
		return 0, fmt.Errorf("%w: containerd %s reads config versions up to 3; crivk's config for containerd 2 is version 4, "+
			"which containerd 2.3 and newer read: upgrade it to 2.3 or newer (%s)", ErrUnsupportedContainerd, v, supported)
	case v.Major == 2:
		return 4, nil
	default:
		return 0, fmt.Errorf("%w: containerd %s is newer than crivk knows: %s", ErrUnsupportedContainerd, v, supported)
	}
}

// versionRE is a release as containerd's --version spells it: v2.4.2,
// 1.6.20~ds1 (Debian), 1.7.27, 2.1.0-rc.1, v1.7.23-k3s2.
var versionRE = regexp.MustCompile(`^v?(\d+)\.(\d+)(?:\.(\d+))?`)

// ParseContainerdVersion reads the output of `containerd --version`:
// "containerd <module or package> <version> [<revision>]", such as
//
//	containerd github.com/containerd/containerd/v2 v2.4.2 <revision>
//	containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3
//	containerd containerd.io 1.7.27 05044ec0a9a75232cad458027ca83437aae3f4da
//
// The version is the third word.
func ParseContainerdVersion(out string) (ContainerdVersion, error) {
	line, _, _ := strings.Cut(strings.TrimSpace(out), "\n")
	f := strings.Fields(line)
	if len(f) < 3 || f[0] != "containerd" {
		return ContainerdVersion{}, fmt.Errorf("%q is not the output of containerd --version (want \"containerd <package> <version> ...\")", line)
	}
	m := versionRE.FindStringSubmatch(f[2])
	if m == nil {
		return ContainerdVersion{}, fmt.Errorf("containerd --version: %q is not a version (want [v]MAJOR.MINOR[.PATCH])", f[2])
	}
	var v ContainerdVersion
	v.Major, _ = strconv.Atoi(m[1])
	v.Minor, _ = strconv.Atoi(m[2])
	if m[3] != "" {
		v.Patch, _ = strconv.Atoi(m[3])
	}
	return v, nil
}

// ParseVersionFlag reads MAJOR.MINOR[.PATCH] (2.4.2, v1.6), the form of
// -containerd-version.
func ParseVersionFlag(s string) (ContainerdVersion, error) {
	m := versionRE.FindStringSubmatch(s)
	if m == nil || len(m[0]) != len(s) {
		return ContainerdVersion{}, fmt.Errorf("containerd version %q: want MAJOR.MINOR[.PATCH]", s)
	}
	return ParseContainerdVersion("containerd - " + s)
}

// versionOf runs cmd, a containerd with --version, and reads its version.
func versionOf(cmd *exec.Cmd) (ContainerdVersion, error) {
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && len(ee.Stderr) > 0 {
			err = fmt.Errorf("%w: %s", err, strings.TrimSpace(string(ee.Stderr)))
		}
		return ContainerdVersion{}, fmt.Errorf("%s: %w", strings.Join(cmd.Args, " "), err)
	}
	v, err := ParseContainerdVersion(string(out))
	if err != nil {
		return v, fmt.Errorf("%s: %w", cmd.Path, err)
	}
	return v, nil
}
