package credentialprovider

import (
	"context"
	"fmt"
	"testing"
)

// TestURLsMatch: matchImages globbing, the kubelet's URLsMatch cases
// (keyring_test.go's TestURLsMatch) and the path prefix taken as a string.
func TestURLsMatch(t *testing.T) {
	for _, tc := range []struct {
		glob, target string
		want         bool
	}{
		{"*.kubernetes.io", "prefix.kubernetes.io", true},
		{"prefix.*.io", "prefix.kubernetes.io", true},
		{"prefix.kubernetes.*", "prefix.kubernetes.io", true},
		{"*-good.kubernetes.io", "prefix-good.kubernetes.io", true},
		{"*.kubernetes.io/blah", "prefix.kubernetes.io/blah", true},
		{"prefix.*.io/foo", "prefix.kubernetes.io/foo/bar", true},
		{"*.kubernetes.io:1111/blah", "prefix.kubernetes.io:1111/blah", true},
		{"prefix.*.io:1111/foo", "prefix.kubernetes.io:1111/foo/bar", true},
		{"*.*.*.kubernetes.io", "a.b.c.kubernetes.io", true},
		{"*kubernetes.io", "kubernetes.io", true},
		{"registry.io/foo", "registry.io/foobar", true}, // a string prefix, not whole components
		{"registry.io", "registry.io/any/path", true},
		{"*.kubernetes.io", "kubernetes.io", false},
		{"*.*.kubernetes.io", "prefix.kubernetes.io", false},
		{"*.*.kubernetes.io", "kubernetes.io", false},
		{"*kubernetes.io", "a.kubernetes.io", false},
		{"kubernetes.io", "kubernetes.com", false},
		{"k*.io", "quay.io", false},
		{"*.kubernetes.io:1234/blah", "prefix.kubernetes.io:1111/blah", false},
		{"prefix.*.io/foo", "prefix.kubernetes.io:1111/foo/bar", false},
		{"registry.io:5000", "registry.io/x", false},
		{"registry.io/foo/bar", "registry.io/foo", false},
	} {
		if got, _ := URLsMatch(tc.glob, tc.target); got != tc.want {
			t.Errorf("URLsMatch(%q, %q) = %v, want %v", tc.glob, tc.target, got, tc.want)
		}
	}
}

// TestKeyringLookup: the keys of the providers' answers, matched as the
// kubelet's BasicDockerKeyring: a longer key of a host first, the
// providers in order for one key, "/v1/" and "/v2/" paths and schemes
// ignored, Docker Hub's key for Docker Hub images no key matched.
func TestKeyringLookup(t *testing.T) {
	sa := &ServiceAccountCoordinates{UID: "u", Namespace: "ns", Name: "sa"}
	var k keyring
	ctx := context.Background()
	k.add(ctx, nil, map[string]Credential{
		"registry.io":              {Username: "host"},
		"registry.io/team":         {Username: "team"},
		"https://other.io/v2/":     {Username: "other"},
		"index.docker.io/v1/":      {Username: "hub"},
		"*.glob.io":                {Username: "glob"},
		"registry.io:5000/x":       {Username: "port"},
		"%not a url":               {Username: "bad"},
		"registry.io/team/project": {Username: "project"},
	})
	k.add(ctx, sa, map[string]Credential{"registry.io/team": {Username: "team-sa"}})
	for image, want := range map[string]string{
		"registry.io/team/project/app": "[project team team-sa host]",
		"registry.io/teamx/app":        "[team team-sa host]", // string prefix
		"registry.io/app":              "[host]",
		"other.io/a/b":                 "[other]",
		"a.glob.io/x":                  "[glob]",
		"a.b.glob.io/x":                "[]",
		"registry.io:5000/x/y":         "[port]",
		"docker.io/library/busybox":    "[hub]",
		"quay.io/x":                    "[]",
	} {
		var got []string
		for _, c := range k.lookup(image) {
			got = append(got, c.Username)
			if (c.ServiceAccount != nil) != (c.Username == "team-sa") {
				t.Errorf("%s: credential %s with service account %v", image, c.Username, c.ServiceAccount)
			}
		}
		if fmt.Sprint(got) != want && !(want == "[]" && got == nil) {
			t.Errorf("%s: credentials %v, want %s", image, got, want)
		}
	}
}
