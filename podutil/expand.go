package podutil

import (
	"fmt"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Expand replaces $(VAR) with its value where lookup defines VAR, turns $$
// into $, and leaves everything else as written: the semantics of
// Kubernetes' variable expansion for command, args and env.
func Expand(in string, lookup func(string) (string, bool)) string {
	if !strings.Contains(in, "$") {
		return in
	}
	var b strings.Builder
	for i := 0; i < len(in); i++ {
		if in[i] != '$' || i+1 >= len(in) {
			b.WriteByte(in[i])
			continue
		}
		switch in[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(in[i+2:], ')')
			if end < 0 {
				// Unterminated reference: keep "$(" and go on scanning.
				b.WriteString("$(")
				i++
				continue
			}
			name := in[i+2 : i+2+end]
			if v, ok := lookup(name); ok {
				b.WriteString(v)
			} else {
				b.WriteString("$(" + name + ")")
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// ResolvePort turns a hook's or probe's port (a number, or the name of one
// of the container's ports, or a number written as a string) into a port
// number, as the kubelet's handlers do.
func ResolvePort(p intstr.IntOrString, c *v1.Container) (int, error) {
	port := -1
	if p.Type == intstr.String {
		for _, cp := range c.Ports {
			if cp.Name == p.StrVal {
				port = int(cp.ContainerPort)
			}
		}
		if port < 0 {
			n, err := strconv.Atoi(p.StrVal)
			if err != nil {
				return -1, fmt.Errorf("couldn't find port %q in container %q", p.StrVal, c.Name)
			}
			port = n
		}
	} else {
		port = p.IntValue()
	}
	if port <= 0 || port > 65535 {
		return -1, fmt.Errorf("invalid port number: %v", port)
	}
	return port, nil
}
