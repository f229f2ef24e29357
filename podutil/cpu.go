package podutil

// The kubelet's CPU cgroup constants (pkg/kubelet/cm).
const (
	// MinShares is the least CPU shares a cgroup gets (also BestEffort's).
	MinShares     = 2
	maxShares     = 262144
	sharesPerCPU  = 1024
	milliCPUToCPU = 1000
	// minQuotaPeriod is the least CFS quota set, in microseconds (1 ms).
	minQuotaPeriod = 1000
)

// MilliCPUToShares is the kubelet's MilliCPUToShares: 1024 shares per CPU,
// at least 2 (also for no request), at most 262144.
func MilliCPUToShares(milliCPU int64) int64 {
	if milliCPU == 0 {
		return MinShares
	}
	shares := milliCPU * sharesPerCPU / milliCPUToCPU
	return min(max(shares, MinShares), maxShares)
}

// MilliCPUToQuota is the kubelet's MilliCPUToQuota: no limit is quota 0
// (unlimited); otherwise the limit's share of period, at least 1 ms.
func MilliCPUToQuota(milliCPU, period int64) int64 {
	if milliCPU == 0 {
		return 0
	}
	return max(milliCPU*period/milliCPUToCPU, minQuotaPeriod)
}

// SharesToMilliCPU is the kubelet's sharesToMilliCPU, the inverse of
// MilliCPUToShares as a CPU request the runtime's shares stand for: 0
// below MinShares, rounded up.
func SharesToMilliCPU(shares int64) int64 {
	if shares < MinShares {
		return 0
	}
	return (shares*milliCPUToCPU + sharesPerCPU - 1) / sharesPerCPU
}

// QuotaToMilliCPU is the kubelet's quotaToMilliCPU: the CPU limit a CFS
// quota over period stands for (0 for no quota, -1).
func QuotaToMilliCPU(quota, period int64) int64 {
	if quota == -1 || period <= 0 {
		return 0
	}
	return quota * milliCPUToCPU / period
}
