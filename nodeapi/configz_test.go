package nodeapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// TestConfigz: /configz is the kubelet's shape, {"kubeletconfig": {...}}
// in the v1beta1 field names with apiVersion and kind (#136044) even when
// the given struct has none, and is served only when the configuration is
// given.
func TestConfigz(t *testing.T) {
	cfg := testConfig(t)
	cfg.KubeletConfig = func() *kubeletv1beta1.KubeletConfiguration {
		return &kubeletv1beta1.KubeletConfiguration{MaxPods: 42, StaticPodPath: "/etc/m"}
	}
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/configz", nil))
	if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("GET /configz: %d %s %q", w.Code, w.Header().Get("Content-Type"), w.Body.String())
	}
	var got map[string]map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	kc := got["kubeletconfig"]
	if kc["maxPods"] != float64(42) || kc["staticPodPath"] != "/etc/m" || kc["kind"] != "KubeletConfiguration" || kc["apiVersion"] != "kubelet.config.k8s.io/v1beta1" {
		t.Errorf("kubeletconfig = %v: want maxPods 42, staticPodPath /etc/m, kind KubeletConfiguration, apiVersion kubelet.config.k8s.io/v1beta1", kc)
	}

	h, err = New(testConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/configz", nil))
	if w.Code != http.StatusNotFound {
		t.Errorf("GET /configz without a configuration: %d, want 404", w.Code)
	}
}
