package volume

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/crivk/crivk/podutil"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// resolveSubPath returns the host path of sub inside the volume at base:
// sub must be relative without "..", and once every symlink is resolved it
// must still lie inside the volume (a container could otherwise make a
// symlink point anywhere on the host). A missing subPath is created as a
// directory, as the kubelet does.
func resolveSubPath(base, sub string) (string, error) {
	if filepath.IsAbs(sub) {
		return "", fmt.Errorf("must be a relative path")
	}
	for _, part := range strings.Split(sub, "/") {
		if part == ".." {
			return "", fmt.Errorf("must not contain '..'")
		}
	}
	realBase, err := filepath.EvalSymlinks(base)
	if err != nil {
		return "", err
	}
	full := filepath.Join(base, sub)
	if _, err := os.Lstat(full); os.IsNotExist(err) {
		if err := os.MkdirAll(full, 0o750); err != nil {
			return "", err
		}
	}
	real, err := filepath.EvalSymlinks(full)
	if err != nil {
		return "", err
	}
	if real != realBase && !strings.HasPrefix(real, realBase+"/") {
		return "", fmt.Errorf("resolves to %s, outside the volume", real)
	}
	return real, nil
}

// expandSubPath expands the $(VAR) references of a subPathExpr with the
// container's resolved environment (env, the same values the container
// sees). An unresolvable reference or a result that is not a relative path
// is an error, as with the kubelet.
func expandSubPath(expr string, c *v1.Container, env map[string]string) (string, error) {
	missing := false
	out := podutil.Expand(expr, func(name string) (string, bool) {
		v, ok := env[name]
		if !ok {
			missing = true
		}
		return v, ok
	})
	if missing {
		return "", fmt.Errorf("subPathExpr %q of container %q references an unknown variable", expr, c.Name)
	}
	if errs := validateSubPath(out); len(errs) > 0 {
		return "", fmt.Errorf("subPathExpr %q of container %q expands to an invalid path %q: %v", expr, c.Name, out, errs.ToAggregate())
	}
	return out, nil
}

func validateSubPath(p string) field.ErrorList {
	var errs field.ErrorList
	if filepath.IsAbs(p) {
		errs = append(errs, field.Invalid(field.NewPath("subPathExpr"), p, "must be a relative path"))
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			errs = append(errs, field.Invalid(field.NewPath("subPathExpr"), p, "must not contain '..'"))
			break
		}
	}
	return errs
}
