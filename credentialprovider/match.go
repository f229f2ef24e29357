package credentialprovider

import (
	"net"
	"net/url"
	"path/filepath"
	"strings"
)

// The matching of an image against a pattern (a provider's matchImages,
// a key of a response's auth): the kubelet's URLsMatch
// (pkg/credentialprovider/keyring.go), rule for rule.
//
//   - the pattern and the image are read as URLs without scheme
//     ("https://" put in front);
//   - the host has as many dot-separated parts as the pattern's, each
//     matched by the pattern's part as a filepath.Match glob: "*.k8s.io"
//     matches "registry.k8s.io", not "a.registry.k8s.io"; "app*.k8s.io"
//     matches "app1.k8s.io";
//   - the ports are equal (none and none included): no glob in a port;
//   - the pattern's path is a prefix of the image's, as strings (not by
//     whole components: "registry.io/foo" matches "registry.io/foobar"),
//     no glob in a path.

// parseSchemelessURL is the kubelet's ParseSchemelessURL.
func parseSchemelessURL(s string) (*url.URL, error) {
	u, err := url.Parse("https://" + s)
	if err != nil {
		return nil, err
	}
	u.Scheme = ""
	return u, nil
}

// splitURL is the host's parts and the port.
func splitURL(u *url.URL) ([]string, string) {
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		host, port = u.Host, ""
	}
	return strings.Split(host, "."), port
}

// URLsMatch reports whether target (an image's repository, host
// included) matches glob (a matchImages entry or a credential's key). An
// error is a glob or URL that cannot be parsed.
func URLsMatch(glob, target string) (bool, error) {
	g, err := parseSchemelessURL(glob)
	if err != nil {
		return false, err
	}
	t, err := parseSchemelessURL(target)
	if err != nil {
		return false, err
	}
	gParts, gPort := splitURL(g)
	tParts, tPort := splitURL(t)
	if gPort != tPort || len(gParts) != len(tParts) || !strings.HasPrefix(t.Path, g.Path) {
		return false, nil
	}
	for i, gp := range gParts {
		ok, err := filepath.Match(gp, tParts[i])
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}
