package podutil

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Cases taken from the kubelet's third_party/forked/golang/expansion tests.
func TestExpand(t *testing.T) {
	vars := map[string]string{
		"VAR_A":     "A",
		"VAR_B":     "B",
		"VAR_C":     "C",
		"VAR_REF":   "$(VAR_A)",
		"VAR_EMPTY": "",
	}
	tests := map[string]struct {
		in, want string
	}{
		"no operator":                            {in: "plain text", want: "plain text"},
		"whole":                                  {in: "$(VAR_A)", want: "A"},
		"inside":                                 {in: "___$(VAR_B)___", want: "___B___"},
		"several":                                {in: "$(VAR_A)-$(VAR_B)-$(VAR_C)", want: "A-B-C"},
		"escaped operator":                       {in: "$$", want: "$"},
		"escape and expand":                      {in: "$$(VAR_B)_$(VAR_A)", want: "$(VAR_B)_A"},
		"compound escape":                        {in: "$$(VAR_A)_$$(VAR_B)", want: "$(VAR_A)_$(VAR_B)"},
		"undefined var left as is":               {in: "$(VAR_DNE)", want: "$(VAR_DNE)"},
		"empty var":                              {in: "foo$(VAR_EMPTY)bar", want: "foobar"},
		"value is not expanded again":            {in: "$(VAR_REF)", want: "$(VAR_A)"},
		"unterminated":                           {in: "foo$(VAR_Awhoops!", want: "foo$(VAR_Awhoops!"},
		"trailing unterminated after var":        {in: "$(VAR_B)_______$(A", want: "B_______$(A"},
		"trailing opener only":                   {in: "$(VAR_C)_______$(", want: "C_______$("},
		"operator at end":                        {in: "$(VAR_A)foobarzab$", want: "Afoobarzab$"},
		"bare operator":                          {in: "$VAR_A", want: "$VAR_A"},
		"shell syntax ignored":                   {in: "${VAR_A}", want: "${VAR_A}"},
		"shell special vars":                     {in: "$?_boo_$!", want: "$?_boo_$!"},
		"even operators, defined":                {in: "$$$$$$(VAR_A)", want: "$$$(VAR_A)"},
		"odd operators, defined":                 {in: "$$$$$$$(VAR_A)", want: "$$$A"},
		"nested references":                      {in: "$(VAR_A$(VAR_B))", want: "$(VAR_A$(VAR_B))"},
		"escaped operator inside a name":         {in: "$(foo$$var)", want: "$(foo$$var)"},
		"non-ASCII after operator":               {in: "prefix-$€-suffix", want: "prefix-$€-suffix"},
		"lots of openers":                        {in: "--$($($($($--", want: "--$($($($($--"},
		"escape after an unterminated reference": {in: "$(VAR_A $$", want: "$(VAR_A $"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Expand(tc.in, func(name string) (string, bool) { v, ok := vars[name]; return v, ok }); got != tc.want {
				t.Errorf("expand(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestResolvePort(t *testing.T) {
	c := &v1.Container{Name: "web", Ports: []v1.ContainerPort{{Name: "http", ContainerPort: 8080}}}
	for name, tc := range map[string]struct {
		port    intstr.IntOrString
		want    int
		wantErr string
	}{
		"number":           {port: intstr.FromInt32(80), want: 80},
		"named port":       {port: intstr.FromString("http"), want: 8080},
		"number as string": {port: intstr.FromString("9090"), want: 9090},
		"unknown name":     {port: intstr.FromString("grpc"), wantErr: `couldn't find port "grpc" in container "web"`},
		"zero":             {port: intstr.FromInt32(0), wantErr: "invalid port number: 0"},
		"above 65535":      {port: intstr.FromInt32(70000), wantErr: "invalid port number: 70000"},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := ResolvePort(tc.port, c)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Errorf("ResolvePort(%v) = %d, %v; want error %q", tc.port, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("ResolvePort(%v) = %d, %v; want %d", tc.port, got, err, tc.want)
			}
		})
	}
}
