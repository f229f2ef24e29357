package podutil

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// HTTPGetURL is the URL an httpGet probe or lifecycle hook of container c
// requests, as the kubelet builds it for both (pkg/probe/http's request):
// the action's host or else defaultHost (the pod's IP), its port resolved
// by name against the container's ports, its scheme lower-cased (http when
// empty), and its path with a leading slash.
func HTTPGetURL(g *v1.HTTPGetAction, c *v1.Container, defaultHost string) (*url.URL, error) {
	port, err := ResolvePort(g.Port, c)
	if err != nil {
		return nil, err
	}
	host := g.Host
	if host == "" {
		host = defaultHost
	}
	scheme := strings.ToLower(string(g.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	path := g.Path
	if path != "" && !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	u, err := url.Parse(path)
	if err != nil {
		return nil, fmt.Errorf("parsing path %q: %w", g.Path, err)
	}
	u.Scheme = scheme
	u.Host = net.JoinHostPort(host, strconv.Itoa(port))
	return u, nil
}
