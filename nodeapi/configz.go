package nodeapi

import (
	"encoding/json"
	"net/http"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// configz serves /configz as the kubelet's (component-base/configz, set
// by cmd/kubelet's setConfigz): one JSON object whose key "kubeletconfig"
// holds the effective configuration in the v1beta1 field names, with
// apiVersion kubelet.config.k8s.io/v1beta1 and kind KubeletConfiguration
// whatever the given struct's TypeMeta holds (since v1.36 the kubelet's
// convertToVersionedKubeletConfig stamps the GroupVersionKind, #136044).
// Auth authorises it as nodes/configz, then nodes/proxy. Any method is
// answered, as the kubelet's handler does.
type configz struct {
	config func() *kubeletv1beta1.KubeletConfiguration
}

func (c configz) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	cfg := *c.config()
	cfg.SetGroupVersionKind(kubeletv1beta1.SchemeGroupVersion.WithKind("KubeletConfiguration"))
	b, err := json.Marshal(map[string]any{"kubeletconfig": cfg})
	if err != nil {
		http.Error(w, "error marshaling json: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(b)
}
