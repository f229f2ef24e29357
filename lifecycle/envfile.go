package lifecycle

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"

	securejoin "github.com/cyphar/filepath-securejoin"
	"github.com/virtual-kubelet/virtual-kubelet/log"
	v1 "k8s.io/api/core/v1"
)

// fileKeyValue resolves an env[].valueFrom.fileKeyRef (EnvFiles, beta and
// on in v1.35) as the kubelet's makeEnvironmentVariables does: the file is
// ref.Path inside the host directory of the pod's volume ref.VolumeName
// (the API server only admits emptyDir volumes there), joined without
// leaving it; the value is the key's in that file (envFileValue's format).
//
// A key that is missing, or present with the empty value, leaves the
// variable undefined when the reference is optional (skip) and is an error
// otherwise. A file that cannot be read or parsed is an error even when
// optional: the kubelet does the same (its message hides the parse error,
// which is logged). The texts are the kubelet's CreateContainerConfigError
// messages.
func (r *envResolver) fileKeyValue(ctx context.Context, pod *v1.Pod, ref *v1.FileKeySelector) (val string, skip bool, err error) {
	var dir string
	ok := false
	if r.volumePath != nil {
		dir, ok = r.volumePath(ref.VolumeName)
	}
	if !ok {
		return "", false, fmt.Errorf("cannot find the volume %q referenced by FileKeyRef", ref.VolumeName)
	}
	path, err := securejoin.SecureJoin(dir, ref.Path)
	if err != nil {
		return "", false, err
	}
	val, err = envFileValue(path, ref.Key)
	if err != nil {
		log.G(ctx).WithError(err).WithField("pod", pod.Namespace+"/"+pod.Name).WithField("uid", pod.UID).
			Error("Failed to parse env file")
		return "", false, fmt.Errorf("couldn't parse env file")
	}
	if val == "" {
		if optional(ref.Optional) {
			return "", true, nil
		}
		return "", false, fmt.Errorf("environment variable key %q not found in file %q", ref.Key, path)
	}
	return val, false, nil
}

// envFileValue returns the value of key in the environment file at path,
// "" when the key is not there. The format is the kubelet's (pkg/kubelet/
// util/env ParseEnv), a strict subset of POSIX shell assignments:
//
//	# a comment line; blank lines are skipped
//	NAME='value'            # the value in single quotes, taken literally
//	MULTI='first
//	second'                 # a quoted value may span lines
//	EMPTY= 'ignored'        # blank after '=': the empty value
//
// Anything else (no '=', blank before '=', an unquoted value, text after
// the closing quote other than a comment, an unclosed quote) is an error,
// but only if it comes before the key: the first assignment of key wins
// and the rest of the file is not read.
func envFileValue(path, key string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("failed to open environment variable file %q: %w", path, err)
	}
	defer func() { _ = f.Close() }()

	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimLeft(sc.Text(), " \t")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, value, found := strings.Cut(line, "=")
		if !found {
			return "", fmt.Errorf("invalid environment variable format at line %d: missing '='", n)
		}
		trimmed := strings.TrimRight(name, " \t")
		if trimmed == "" {
			return "", fmt.Errorf("invalid environment variable format at line %d: empty variable name", n)
		}
		if trimmed != name {
			return "", fmt.Errorf("invalid environment variable format at line %d: whitespace before '=' is not allowed", n)
		}
		if v := strings.TrimLeft(value, " \t"); v != value {
			// As in a shell, NAME= 'x' assigns the empty value.
			if name == key {
				return "", nil
			}
			continue
		}
		if !strings.HasPrefix(value, "'") {
			return "", fmt.Errorf("invalid environment variable format at line %d: value must be enclosed in single quotes", n)
		}
		var b strings.Builder
		rest, start := value[1:], n
		for {
			before, after, closed := strings.Cut(rest, "'")
			if closed {
				b.WriteString(before)
				if tail := strings.TrimLeft(after, " \t"); tail != "" && !strings.HasPrefix(tail, "#") {
					return "", fmt.Errorf("invalid environment variable format at line %d: unexpected content after closing quote", n)
				}
				break
			}
			b.WriteString(rest)
			b.WriteString("\n")
			if !sc.Scan() {
				return "", fmt.Errorf("invalid environment variable format starting at line %d: unclosed single quote", start)
			}
			n++
			rest = sc.Text()
		}
		if name == key {
			return b.String(), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("error reading environment variable file %q: %w", path, err)
	}
	return "", nil
}
