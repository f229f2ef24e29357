package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
)

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// layoutTar writes an OCI image-layout tarball of one image named name, as
// hack/images.sh's mkimage does, and returns its path and manifest digest.
// The manifest is written indented with its keys in an order Go's
// encoding/json would not choose, so a push that re-encoded it would change
// its digest.
func layoutTar(t *testing.T, name string) (path, digest string) {
	t.Helper()
	var layer bytes.Buffer
	gz := gzip.NewWriter(&layer)
	tw := tar.NewWriter(gz)
	content := []byte("hello from the mirror\n")
	if err := tw.WriteHeader(&tar.Header{Name: "hello", Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	tw.Write(content)
	tw.Close()
	gz.Close()
	var diff bytes.Buffer
	zr, err := gzip.NewReader(bytes.NewReader(layer.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(&diff, zr)
	config := []byte(fmt.Sprintf(`{"architecture":"amd64","os":"linux","config":{"Cmd":["/hello"]},"rootfs":{"type":"layers","diff_ids":[%q]}}`, sha(diff.Bytes())))
	manifest := []byte(fmt.Sprintf(`{
  "schemaVersion": 2,
  "layers": [
    {"size": %d, "digest": %q, "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip"}
  ],
  "config": {"size": %d, "digest": %q, "mediaType": "application/vnd.oci.image.config.v1+json"},
  "mediaType": "application/vnd.oci.image.manifest.v1+json"
}
`, layer.Len(), sha(layer.Bytes()), len(config), sha(config)))
	digest = sha(manifest)
	index := []byte(fmt.Sprintf(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","size":%d,"digest":%q,"annotations":{"io.containerd.image.name":%q,"org.opencontainers.image.ref.name":"x"}}]}`,
		len(manifest), digest, name))

	path = filepath.Join(t.TempDir(), "image.tar")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	out := tar.NewWriter(f)
	for _, e := range []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", index},
		{"blobs/sha256/" + strings.TrimPrefix(sha(layer.Bytes()), "sha256:"), layer.Bytes()},
		{"blobs/sha256/" + strings.TrimPrefix(sha(config), "sha256:"), config},
		{"blobs/sha256/" + strings.TrimPrefix(digest, "sha256:"), manifest},
	} {
		if err := out.WriteHeader(&tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := out.Write(e.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path, digest
}

// TestPushKeepsDigest: `regtool push` of a layout tarball to a TLS registry
// (the -ca file trusted) stores the manifest byte for byte: pulling the
// tag back answers the tarball's manifest digest (Docker-Content-Digest and
// the body's sha256), which is what containerd imported, so a pull through
// hack/local-up.sh's mirror finds the image it already has.
func TestPushKeepsDigest(t *testing.T) {
	tarball, want := layoutTar(t, "registry.k8s.io/e2e-test-images/agnhost:2.59")
	srv := httptest.NewTLSServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(srv.URL, "https://")
	var out bytes.Buffer
	if err := push([]string{"-ca", ca, tarball, host + "/e2e-test-images/agnhost:2.59", host + "/pause:other"}, &out); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(out.String()); got != want {
		t.Errorf("push printed %q, want the tarball's manifest digest %s", got, want)
	}
	for _, path := range []string{"/v2/e2e-test-images/agnhost/manifests/2.59", "/v2/pause/manifests/other", "/v2/pause/manifests/" + want} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		req.Header.Set("Accept", "application/vnd.oci.image.manifest.v1+json")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s", path, resp.Status)
		}
		if got := resp.Header.Get("Docker-Content-Digest"); got != want {
			t.Errorf("GET %s: Docker-Content-Digest %s, want %s", path, got, want)
		}
		if got := sha(body); got != want {
			t.Errorf("GET %s: the manifest's sha256 is %s, want %s (re-encoded?)\n%s", path, got, want, body)
		}
	}
}

// TestPrintNames: the names are the index's io.containerd.image.name
// annotations; a tarball without index.json, or without the annotation,
// is an error.
func TestPrintNames(t *testing.T) {
	tarball, _ := layoutTar(t, "registry.k8s.io/pause:3.10.1")
	var out bytes.Buffer
	if err := printNames(tarball, &out); err != nil {
		t.Fatal(err)
	}
	if out.String() != "registry.k8s.io/pause:3.10.1\n" {
		t.Errorf("names %q", out.String())
	}
	noName, _ := layoutTar(t, "")
	empty := filepath.Join(t.TempDir(), "empty.tar")
	if err := os.WriteFile(empty, make([]byte, 1024), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, path := range map[string]string{"no annotation": noName, "no index.json": empty, "missing": empty + ".x"} {
		if err := printNames(path, io.Discard); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
