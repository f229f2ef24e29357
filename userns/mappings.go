package userns

import (
	"errors"
	"fmt"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
)

// kubeletUser is the user whose subordinate IDs are the node's range (the
// kubelet's kubeletUser: crivk takes the same, so that a node set up for
// the kubelet is set up for crivk).
const kubeletUser = "kubelet"

// Mappings is the node's range of host IDs for pods' user namespaces (the
// kubelet's getKubeletMappings): without a `kubelet` user, every ID from
// idsPerPod to 2^32; with one, the one
// range getsubids gives for the user, which must be the same for UIDs and
// GIDs. A `kubelet` user without getsubids, or that getsubids gives
// nothing for (its answer may come from a remote service that is down), is
// an error, as it is for the kubelet.
func Mappings(idsPerPod uint32) (first, length uint32, err error) {
	return mappings(idsPerPod, lookupUser, exec.LookPath, runGetsubids)
}

func mappings(idsPerPod uint32, lookup func(string) error, lookPath func(string) (string, error),
	run func(cmd string, args ...string) ([]byte, error)) (uint32, uint32, error) {
	if idsPerPod == 0 {
		idsPerPod = UnitLength
	}
	defFirst, defLen := idsPerPod, uint32((1<<32)-uint64(idsPerPod))
	if err := lookup(kubeletUser); err != nil {
		var unknown user.UnknownUserError
		if errors.As(err, &unknown) {
			return defFirst, defLen, nil
		}
		return 0, 0, err
	}
	// A `kubelet` user without getsubids is the kubelet's error too (its
	// os.IsNotExist test is false for exec.LookPath's error): its range
	// may be in /etc/subuid, and the default would overlap it.
	cmd, err := lookPath("getsubids")
	if err != nil {
		return 0, 0, err
	}
	uids, err := run(cmd, kubeletUser)
	if err != nil {
		return 0, 0, fmt.Errorf("error retrieving additional uids for user %q: %w", kubeletUser, err)
	}
	gids, err := run(cmd, "-g", kubeletUser)
	if err != nil {
		return 0, 0, fmt.Errorf("error retrieving additional gids for user %q", kubeletUser)
	}
	if string(uids) != string(gids) {
		return 0, 0, fmt.Errorf("mismatched subuids and subgids for user %q", kubeletUser)
	}
	return parseGetsubids(string(uids))
}

// parseGetsubids reads getsubids' one line, "0: kubelet 65536 2147483648".
func parseGetsubids(out string) (uint32, uint32, error) {
	lines := strings.Split(strings.Trim(out, "\n"), "\n")
	if len(lines) != 1 {
		return 0, 0, fmt.Errorf("error parsing line %q: it must contain only one line", out)
	}
	parts := strings.Fields(lines[0])
	if len(parts) != 4 {
		return 0, 0, fmt.Errorf("invalid line %q", out)
	}
	first, err := strconv.ParseUint(parts[2], 10, 32)
	if err != nil {
		return 0, 0, fmt.Errorf("error parsing line %q: %w", out, err)
	}
	length, err := strconv.ParseUint(parts[3], 10, 32)
	if err != nil {
		return 0, 0, fmt.Errorf("error parsing line %q: %w", out, err)
	}
	return uint32(first), uint32(length), nil
}

func lookupUser(name string) error {
	_, err := user.Lookup(name)
	return err
}

func runGetsubids(cmd string, args ...string) ([]byte, error) {
	return exec.Command(cmd, args...).Output()
}
