package helm

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// splitImage splits an image reference (without digest) into repository
// and tag ("latest" when it has none).
func splitImage(ref string) (repo, tag string) {
	i := strings.LastIndex(ref, ":")
	if i < 0 || strings.Contains(ref[i:], "/") {
		return ref, "latest"
	}
	return ref[:i], ref[i+1:]
}

// normalizeImage is ref as containerd names it: docker.io/library/ for a
// bare name, docker.io/ for a path without a registry host, :latest when it
// has no tag.
func normalizeImage(ref string) string {
	repo, tag := splitImage(ref)
	first, _, hasSlash := strings.Cut(repo, "/")
	switch {
	case !hasSlash:
		repo = "docker.io/library/" + repo
	case !strings.ContainsAny(first, ".:") && first != "localhost":
		repo = "docker.io/" + repo
	}
	return repo + ":" + tag
}

var renderedImage = regexp.MustCompile(`(?m)^\s*image:\s*"?([^"\s]+)"?\s*$`)

// checkPackagedImage: every container of the packaged chart, rendered with
// its own defaults, runs the release's image (the one imported), and the
// chart's appVersion is the release's version (issue #32: the packaged
// chart whose appVersion and default image tag match).
func (e *env) checkPackagedImage(t *testing.T) {
	t.Helper()
	out, err := exec.Command(e.helm, "template", release, e.chart, "--namespace", namespace).CombinedOutput()
	if err != nil {
		t.Fatalf("helm template %s with its defaults: %v\n%s", e.chart, err, out)
	}
	images := renderedImage.FindAllStringSubmatch(string(out), -1)
	if len(images) == 0 {
		t.Fatalf("helm template %s renders no image", e.chart)
	}
	for _, m := range images {
		if normalizeImage(m[1]) != normalizeImage(e.image) {
			t.Fatalf("the packaged chart %s runs image %s by default; the release's image (imported) is %s", e.chart, m[1], e.image)
		}
	}
	meta, err := exec.Command(e.helm, "show", "chart", e.chart).CombinedOutput()
	if err != nil {
		t.Fatalf("helm show chart %s: %v\n%s", e.chart, err, meta)
	}
	if m := regexp.MustCompile(`(?m)^appVersion:\s*"?([^"\s]+)"?`).FindSubmatch(meta); m == nil || string(m[1]) != e.version {
		t.Errorf("the packaged chart %s has appVersion %q, want the release's version %s", e.chart, m, e.version)
	}
	t.Logf("installing the packaged chart %s (image %s)", e.chart, e.image)
}

func TestImageNames(t *testing.T) {
	for name, tc := range map[string]struct{ ref, repo, tag, norm string }{
		"bare":          {"crivk:v1", "crivk", "v1", "docker.io/library/crivk:v1"},
		"docker path":   {"crivk/crivk:v1", "crivk/crivk", "v1", "docker.io/crivk/crivk:v1"},
		"registry":      {"ghcr.io/crivk/crivk:v1", "ghcr.io/crivk/crivk", "v1", "ghcr.io/crivk/crivk:v1"},
		"registry port": {"localhost:5000/crivk", "localhost:5000/crivk", "latest", "localhost:5000/crivk:latest"},
		"normalized":    {"docker.io/library/crivk:v1", "docker.io/library/crivk", "v1", "docker.io/library/crivk:v1"},
	} {
		t.Run(name, func(t *testing.T) {
			repo, tag := splitImage(tc.ref)
			if repo != tc.repo || tag != tc.tag || normalizeImage(tc.ref) != tc.norm {
				t.Errorf("splitImage(%s) = %s, %s; normalizeImage = %s; want %s, %s; %s", tc.ref, repo, tag, normalizeImage(tc.ref), tc.repo, tc.tag, tc.norm)
			}
		})
	}
}
