package evictionapi

import (
	"fmt"
	"testing"
)

func TestParseThresholds(t *testing.T) {
	tests := map[string]struct {
		flags   Flags
		want    string // fmt of the thresholds
		wantErr string
	}{
		"default": {flags: Flags{Hard: DefaultHard},
			want: "[memory.available<100Mi nodefs.available<10% imagefs.available<15% nodefs.inodesFree<5% imagefs.inodesFree<5%]"},
		"soft with grace": {flags: Flags{Hard: "memory.available<1Gi", Soft: "memory.available<2Gi", SoftGracePeriod: "memory.available=1m30s"},
			want: "[memory.available<1Gi memory.available<2Gi (soft, grace 1m30s)]"},
		"0% and 100% ignored":  {flags: Flags{Hard: "nodefs.available<0%,imagefs.available<100%,pid.available<100"}, want: "[pid.available<100]"},
		"containerfs follows":  {flags: Flags{Hard: "containerfs.available<10%"}, want: "[]"},
		"soft without grace":   {flags: Flags{Soft: "memory.available<2Gi"}, wantErr: "grace period must be specified for the soft eviction threshold memory.available"},
		"unknown signal":       {flags: Flags{Hard: "memory.free<1Gi"}, wantErr: "--eviction-hard: unsupported eviction signal memory.free"},
		"zero quantity":        {flags: Flags{Hard: "memory.available<0"}, wantErr: "--eviction-hard: eviction threshold memory.available must be positive: 0"},
		"over 100%":            {flags: Flags{Hard: "nodefs.available<101%"}, wantErr: "--eviction-hard: eviction percentage threshold nodefs.available must be <= 100%: 101%"},
		"not <":                {flags: Flags{Hard: "memory.available>1Gi"}, wantErr: `--eviction-hard: "memory.available>1Gi" is not signal<value`},
		"negative grace":       {flags: Flags{Soft: "memory.available<1Gi", SoftGracePeriod: "memory.available=-1s"}, wantErr: "--eviction-soft-grace-period: memory.available: invalid eviction grace period specified: -1s, must be a positive value"},
		"min reclaim zero pct": {flags: Flags{MinimumReclaim: "memory.available=0%"}, wantErr: "--eviction-minimum-reclaim: memory.available: eviction percentage minimum reclaim memory.available must be positive: 0%"},
		"min reclaim to both": {flags: Flags{Hard: "imagefs.available<1Gi", Soft: "imagefs.available<2Gi", SoftGracePeriod: "imagefs.available=1m", MinimumReclaim: "imagefs.available=500Mi"},
			want: "[imagefs.available<1Gi+500Mi imagefs.available<2Gi (soft, grace 1m0s)+500Mi]"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseThresholds(tc.flags)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var s []string
			for _, th := range got {
				x := th.String()
				if th.MinReclaim != nil {
					x += "+" + th.MinReclaim.String()
				}
				s = append(s, x)
			}
			if fmt.Sprint(s) != tc.want && !(len(s) == 0 && tc.want == "[]") {
				t.Errorf("got %v, want %s", s, tc.want)
			}
		})
	}
}
