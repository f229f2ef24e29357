package kubeletconfig

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	logsapi "k8s.io/component-base/logs/api/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
)

// kubeletDefaults is a KubeletConfiguration as the kubelet v1.35 defaults
// an empty one on Linux (pkg/kubelet/apis/config/v1beta1/defaults.go,
// SetDefaults_KubeletConfiguration, with the default feature gates). A
// field of the file holding the value here is never refused: a file
// written for the kubelet may spell its defaults out.
// It stays one literal: it is a table, one field per line in the order of
// the kubelet's SetDefaults_KubeletConfiguration, read beside it; split,
// a missing default would no longer show.
func kubeletDefaults() KC {
	d := func(t time.Duration) metav1.Duration { return metav1.Duration{Duration: t} }
	c := KC{
		EnableServer:       ptr.To(true),
		SyncFrequency:      d(time.Minute),
		FileCheckFrequency: d(20 * time.Second),
		HTTPCheckFrequency: d(20 * time.Second),
		Address:            "0.0.0.0",
		Port:               10250,
		Authentication: kubeletv1beta1.KubeletAuthentication{
			Anonymous: kubeletv1beta1.KubeletAnonymousAuthentication{Enabled: ptr.To(false)},
			Webhook:   kubeletv1beta1.KubeletWebhookAuthentication{Enabled: ptr.To(true), CacheTTL: d(2 * time.Minute)},
		},
		Authorization: kubeletv1beta1.KubeletAuthorization{
			Mode: kubeletv1beta1.KubeletAuthorizationModeWebhook,
			Webhook: kubeletv1beta1.KubeletWebhookAuthorization{
				CacheAuthorizedTTL: d(5 * time.Minute), CacheUnauthorizedTTL: d(30 * time.Second),
			},
		},
		RegistryPullQPS:                           ptr.To[int32](5),
		RegistryBurst:                             10,
		EventRecordQPS:                            ptr.To[int32](50),
		EventBurst:                                100,
		EnableDebuggingHandlers:                   ptr.To(true),
		HealthzPort:                               ptr.To[int32](10248),
		HealthzBindAddress:                        "127.0.0.1",
		OOMScoreAdj:                               ptr.To[int32](-999),
		StreamingConnectionIdleTimeout:            d(4 * time.Hour),
		NodeStatusReportFrequency:                 d(5 * time.Minute),
		NodeStatusUpdateFrequency:                 d(10 * time.Second),
		NodeLeaseDurationSeconds:                  40,
		ImageMinimumGCAge:                         d(2 * time.Minute),
		ImageGCHighThresholdPercent:               ptr.To[int32](85),
		ImageGCLowThresholdPercent:                ptr.To[int32](80),
		VolumeStatsAggPeriod:                      d(time.Minute),
		CgroupsPerQOS:                             ptr.To(true),
		CgroupDriver:                              "cgroupfs",
		CPUManagerPolicy:                          "none",
		CPUManagerReconcilePeriod:                 d(10 * time.Second),
		MemoryManagerPolicy:                       kubeletv1beta1.NoneMemoryManagerPolicy,
		TopologyManagerPolicy:                     kubeletv1beta1.NoneTopologyManagerPolicy,
		TopologyManagerScope:                      kubeletv1beta1.ContainerTopologyManagerScope,
		RuntimeRequestTimeout:                     d(2 * time.Minute),
		HairpinMode:                               kubeletv1beta1.PromiscuousBridge,
		MaxPods:                                   110,
		PodPidsLimit:                              ptr.To[int64](-1),
		ResolverConfig:                            ptr.To("/etc/resolv.conf"),
		CPUCFSQuota:                               ptr.To(true),
		CPUCFSQuotaPeriod:                         ptr.To(d(100 * time.Millisecond)),
		NodeStatusMaxImages:                       ptr.To[int32](50),
		MaxOpenFiles:                              1000000,
		ContentType:                               "application/vnd.kubernetes.protobuf",
		KubeAPIQPS:                                ptr.To[int32](50),
		KubeAPIBurst:                              100,
		SerializeImagePulls:                       ptr.To(true),
		EvictionHard:                              defaultEvictionHard(),
		EvictionPressureTransitionPeriod:          d(5 * time.Minute),
		MergeDefaultEvictionSettings:              ptr.To(false),
		EnableControllerAttachDetach:              ptr.To(true),
		MakeIPTablesUtilChains:                    ptr.To(true),
		IPTablesMasqueradeBit:                     ptr.To[int32](14),
		IPTablesDropBit:                           ptr.To[int32](15),
		FailSwapOn:                                ptr.To(true),
		ContainerLogMaxSize:                       "10Mi",
		ContainerLogMaxFiles:                      ptr.To[int32](5),
		ContainerLogMaxWorkers:                    ptr.To[int32](1),
		ContainerLogMonitorInterval:               ptr.To(d(10 * time.Second)),
		ConfigMapAndSecretChangeDetectionStrategy: kubeletv1beta1.WatchChangeDetectionStrategy,
		EnforceNodeAllocatable:                    []string{"pods"},
		VolumePluginDir:                           "/usr/libexec/kubernetes/kubelet-plugins/volume/exec/",
		EnableSystemLogHandler:                    ptr.To(true),
		EnableProfilingHandler:                    ptr.To(true),
		EnableDebugFlagsHandler:                   ptr.To(true),
		SeccompDefault:                            ptr.To(false),
		FailCgroupV1:                              ptr.To(true),
		// v1.37 (MemoryQoS beta, #140007, #137584): memoryThrottlingFactor
		// has no default (nil: no memory.high), memoryReservationPolicy is
		// None (no memory.min). crivk writes neither, so a factor set or
		// TieredReservation is refused as any other value not the default.
		MemoryReservationPolicy:       kubeletv1beta1.NoneMemoryReservationPolicy,
		RegisterNode:                  ptr.To(true),
		LocalStorageCapacityIsolation: ptr.To(true),
		ContainerRuntimeEndpoint:      "unix:///run/containerd/containerd.sock",
		PodLogsDir:                    "/var/log/pods",
		// KubeletCrashLoopBackOffMax and KubeletEnsureSecretPulledImages
		// are beta, on by default in v1.35 (pkg/features/kube_features.go).
		CrashLoopBackOff:                       kubeletv1beta1.CrashLoopBackOffConfig{MaxContainerRestartPeriod: ptr.To(d(300 * time.Second))},
		ImagePullCredentialsVerificationPolicy: kubeletv1beta1.NeverVerifyPreloadedImages,
		// Not defaulted by the kubelet, but nil is false to it (the
		// internal field is a bool): its /configz says false.
		EnableSystemLogQuery: ptr.To(false),
	}
	logsapi.SetRecommendedLoggingConfiguration(&c.Logging)
	return c
}
