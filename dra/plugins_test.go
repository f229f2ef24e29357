package dra

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		supported   []string
		wantErr     string
		wantService string
		wantHealth  string
	}{
		"v1":                      {supported: []string{"v1.DRAPlugin"}, wantService: "v1.DRAPlugin"},
		"v1beta1":                 {supported: []string{"v1beta1.DRAPlugin"}, wantService: "v1beta1.DRAPlugin"},
		"the plugin's order":      {supported: []string{"v1beta1.DRAPlugin", "v1.DRAPlugin"}, wantService: "v1beta1.DRAPlugin"},
		"unknown ones skipped":    {supported: []string{"v2.DRAPlugin", "v1.DRAPlugin"}, wantService: "v1.DRAPlugin"},
		"the newest health":       {supported: []string{"v1.DRAPlugin", "v1alpha1.DRAResourceHealth", "v1.DRAResourceHealth"}, wantService: "v1.DRAPlugin", wantHealth: "v1.DRAResourceHealth"},
		"the old health":          {supported: []string{"v1.DRAPlugin", "v1alpha1.DRAResourceHealth"}, wantService: "v1.DRAPlugin", wantHealth: "v1alpha1.DRAResourceHealth"},
		"health only":             {supported: []string{"v1.DRAResourceHealth"}, wantErr: `invalid supported gRPC versions of DRA driver plugin d at endpoint /e.sock: none of services supported by the plugin (["v1.DRAResourceHealth"]) are supported by the kubelet (["v1.DRAPlugin" "v1beta1.DRAPlugin"])`},
		"none":                    {wantErr: "invalid supported gRPC versions of DRA driver plugin d at endpoint /e.sock: empty list of supported gRPC services (aka supported versions)"},
		"an alpha plugin's 1.0.0": {supported: []string{"1.0.0"}, wantErr: `invalid supported gRPC versions of DRA driver plugin d at endpoint /e.sock: none of services supported by the plugin (["1.0.0"]) are supported by the kubelet (["v1.DRAPlugin" "v1beta1.DRAPlugin"])`},
	} {
		t.Run(name, func(t *testing.T) {
			p := New()
			ctx := context.Background()
			err := p.ValidatePlugin(ctx, "d", "/e.sock", tc.supported)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Errorf("ValidatePlugin: %v, want %q", err, tc.wantErr)
				}
				if err := p.RegisterPlugin(ctx, "d", "/e.sock", tc.supported); err == nil || err.Error() != tc.wantErr {
					t.Errorf("RegisterPlugin: %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := p.RegisterPlugin(ctx, "d", "/e.sock", tc.supported); err != nil {
				t.Fatal(err)
			}
			got, err := p.Get("d")
			if err != nil {
				t.Fatal(err)
			}
			want := Plugin{DriverName: "d", Endpoint: "/e.sock", Service: tc.wantService, HealthService: tc.wantHealth}
			if got != want {
				t.Errorf("Get: %+v, want %+v", got, want)
			}
		})
	}
}

// TestRegistry: several plugins of a driver, the newest wins; an
// endpoint is registered once; deregistration by endpoint.
func TestRegistry(t *testing.T) {
	p := New()
	ctx := context.Background()
	v1 := []string{"v1.DRAPlugin"}

	if _, err := p.Get(""); err == nil || err.Error() != "DRA driver name is empty" {
		t.Errorf("Get(\"\"): %v", err)
	}
	_, err := p.Get("gpu.example.com")
	if !errors.Is(err, ErrNotRegistered) || err.Error() != "DRA driver gpu.example.com is not registered" {
		t.Errorf("Get before any registration: %v", err)
	}

	for _, e := range []string{"/old.sock", "/new.sock"} {
		if err := p.RegisterPlugin(ctx, "gpu.example.com", e, v1); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.RegisterPlugin(ctx, "gpu.example.com", "/old.sock", v1); err == nil || err.Error() != "endpoint /old.sock already registered for DRA driver plugin gpu.example.com" {
		t.Errorf("the same endpoint again: %v", err)
	}
	if err := p.RegisterPlugin(ctx, "other.example.com", "/old.sock", v1); err != nil {
		t.Errorf("another driver's endpoint: %v", err)
	}
	endpoint := func(driver string) string {
		got, err := p.Get(driver)
		if err != nil {
			return err.Error()
		}
		return got.Endpoint
	}
	if got := endpoint("gpu.example.com"); got != "/new.sock" {
		t.Errorf("Get: %s, want the newest", got)
	}

	p.DeRegisterPlugin(ctx, "gpu.example.com", "/new.sock")
	if got := endpoint("gpu.example.com"); got != "/old.sock" {
		t.Errorf("after the newest's deregistration: %s", got)
	}
	p.DeRegisterPlugin(ctx, "gpu.example.com", "/unknown.sock")
	p.DeRegisterPlugin(ctx, "gpu.example.com", "/old.sock")
	if got := endpoint("gpu.example.com"); got != "DRA driver gpu.example.com is not registered" {
		t.Errorf("after both deregistrations: %s", got)
	}
	if diff := cmp.Diff("/old.sock", endpoint("other.example.com")); diff != "" {
		t.Errorf("the other driver: %s", diff)
	}
}
