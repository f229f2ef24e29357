package evictionapi

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Flags are the kubelet's eviction flags as given on the command line.
type Flags struct {
	// Hard is --eviction-hard, e.g. "memory.available<100Mi,nodefs.available<10%".
	Hard string
	// Soft is --eviction-soft, in Hard's format.
	Soft string
	// SoftGracePeriod is --eviction-soft-grace-period, e.g. "memory.available=1m30s".
	SoftGracePeriod string
	// MinimumReclaim is --eviction-minimum-reclaim, e.g. "imagefs.available=2Gi".
	MinimumReclaim string
}

// DefaultHard is the kubelet's --eviction-hard default on Linux
// (pkg/kubelet/eviction/defaults_linux.go).
const DefaultHard = "memory.available<100Mi,nodefs.available<10%,imagefs.available<15%,nodefs.inodesFree<5%,imagefs.inodesFree<5%"

// ParseThresholds parses the kubelet's eviction flags into thresholds, with
// the kubelet's rules (ParseThresholdConfig): each soft threshold needs a
// grace period; 0% and 100% thresholds are ignored; a quantity must be
// positive; a minimum reclaim applies to both thresholds of its signal.
// containerfs.* thresholds are dropped: they follow nodefs here (one
// filesystem for containers and the node, as the kubelet without a split
// image filesystem).
func ParseThresholds(f Flags) ([]Threshold, error) {
	hard, err := parseStatements("--eviction-hard", f.Hard)
	if err != nil {
		return nil, err
	}
	soft, err := parseStatements("--eviction-soft", f.Soft)
	if err != nil {
		return nil, err
	}
	grace, err := parseMap("--eviction-soft-grace-period", f.SoftGracePeriod, func(s Signal, v string) (time.Duration, error) {
		d, err := time.ParseDuration(v)
		if err != nil {
			return 0, err
		}
		if d < 0 {
			return 0, fmt.Errorf("invalid eviction grace period specified: %v, must be a positive value", v)
		}
		return d, nil
	})
	if err != nil {
		return nil, err
	}
	minReclaim, err := parseMap("--eviction-minimum-reclaim", f.MinimumReclaim, func(s Signal, v string) (Value, error) {
		if p, ok := strings.CutSuffix(v, "%"); ok {
			pct, err := strconv.ParseFloat(p, 64)
			if err != nil {
				return Value{}, err
			}
			if pct <= 0 {
				return Value{}, fmt.Errorf("eviction percentage minimum reclaim %v must be positive: %s", s, v)
			}
			return Value{Percentage: pct / 100}, nil
		}
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return Value{}, err
		}
		if q.Sign() < 0 {
			return Value{}, fmt.Errorf("negative eviction minimum reclaim specified for %v", s)
		}
		return Value{Quantity: &q}, nil
	})
	if err != nil {
		return nil, err
	}
	for i := range soft {
		d, ok := grace[soft[i].Signal]
		if !ok {
			return nil, fmt.Errorf("grace period must be specified for the soft eviction threshold %v", soft[i].Signal)
		}
		soft[i].GracePeriod = d
	}
	var out []Threshold
	for _, t := range append(hard, soft...) {
		if t.Signal == SignalContainerFsAvailable || t.Signal == SignalContainerFsInodesFree {
			continue
		}
		if r, ok := minReclaim[t.Signal]; ok {
			r := r
			t.MinReclaim = &r
		}
		out = append(out, t)
	}
	return out, nil
}

// parseStatements parses "signal<value,..." (a flag's name for errors).
func parseStatements(flag, s string) ([]Threshold, error) {
	var out []Threshold
	seen := map[Signal]bool{}
	for _, st := range splitList(s) {
		sig, v, err := cutStatement(flag, st, "<")
		if err != nil {
			return nil, err
		}
		if seen[sig] {
			return nil, fmt.Errorf("%s: %v given twice", flag, sig)
		}
		seen[sig] = true
		if p, isPct := strings.CutSuffix(v, "%"); isPct {
			if v == "0%" || v == "100%" {
				continue // the kubelet ignores them
			}
			pct, err := strconv.ParseFloat(p, 64)
			if err != nil {
				return nil, fmt.Errorf("%s: %v<%s: %w", flag, sig, v, err)
			}
			if pct < 0 {
				return nil, fmt.Errorf("%s: eviction percentage threshold %v must be >= 0%%: %s", flag, sig, v)
			}
			if pct > 100 {
				return nil, fmt.Errorf("%s: eviction percentage threshold %v must be <= 100%%: %s", flag, sig, v)
			}
			out = append(out, Threshold{Signal: sig, Value: Value{Percentage: pct / 100}})
			continue
		}
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %v<%s: %w", flag, sig, v, err)
		}
		if q.Sign() <= 0 {
			return nil, fmt.Errorf("%s: eviction threshold %v must be positive: %s", flag, sig, &q)
		}
		out = append(out, Threshold{Signal: sig, Value: Value{Quantity: &q}})
	}
	return out, nil
}

// parseMap parses "signal=value,..." with parse for each value.
func parseMap[T any](flag, s string, parse func(Signal, string) (T, error)) (map[Signal]T, error) {
	out := map[Signal]T{}
	for _, st := range splitList(s) {
		sig, v, err := cutStatement(flag, st, "=")
		if err != nil {
			return nil, err
		}
		x, err := parse(sig, v)
		if err != nil {
			return nil, fmt.Errorf("%s: %v: %w", flag, sig, err)
		}
		out[sig] = x
	}
	return out, nil
}

// cutStatement splits a statement "signal<sep>value" of flag into its
// signal, which must be one of the kubelet's, and its value, both trimmed.
func cutStatement(flag, st, sep string) (Signal, string, error) {
	k, v, ok := strings.Cut(st, sep)
	if !ok {
		return "", "", fmt.Errorf("%s: %q is not signal%svalue", flag, st, sep)
	}
	sig := Signal(strings.TrimSpace(k))
	if !sig.Valid() {
		return "", "", fmt.Errorf("%s: unsupported eviction signal %v", flag, sig)
	}
	return sig, strings.TrimSpace(v), nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
