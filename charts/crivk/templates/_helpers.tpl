{{- define "crivk.fullname" -}}
{{- printf "%s" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "crivk.labels" -}}
app.kubernetes.io/name: crivk
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "crivk.selectorLabels" -}}
app.kubernetes.io/name: crivk
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "crivk.nodeLabels" -}}
{{- $out := list -}}
{{- range $k, $v := .Values.nodeLabels -}}
{{- $out = append $out (printf "%s=%s" $k $v) -}}
{{- end -}}
{{- $out = append $out (printf "crivk.io/release=%s" .Release.Name) -}}
{{- $out = append $out (printf "crivk.io/release-namespace=%s" .Release.Namespace) -}}
{{- join "," $out -}}
{{- end -}}

{{/*
crivk.releaseNodes: the label selector of this release's crivk nodes (the
labels crivk.nodeLabels adds).
*/}}
{{- define "crivk.releaseNodes" -}}
crivk.io/release={{ .Release.Name }},crivk.io/release-namespace={{ .Release.Namespace }}
{{- end -}}

{{- define "crivk.configName" -}}
{{- printf "%s-config" (include "crivk.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
crivk.kubeletConfig: crivk's KubeletConfiguration file. Every value that
has a field of the kubelet's file is written there, not as a flag; config:
is merged over them (crivk.validate refuses the keys the chart writes).
Only fields crivk maps to a flag (kubeletconfig's fields.go) are
written: crivk refuses any other field set to a value not the kubelet's
default.
*/}}
{{- define "crivk.kubeletConfig" -}}
{{- $c := dict
  "containerRuntimeEndpoint" .Values.criEndpoint
  "podLogsDir" .Values.podLogDir
  "cgroupRoot" .Values.cgroupRoot
  "failCgroupV1" .Values.failCgroupV1
  "port" (int .Values.port)
  "healthzPort" (int .Values.healthzPort)
  "healthzBindAddress" "127.0.0.1"
-}}
{{- with .Values.clientCAFile -}}
{{- $_ := set $c "authentication" (dict "x509" (dict "clientCAFile" .)) -}}
{{- end -}}
{{- if eq .Values.servingCert "csr" -}}
{{- $_ := set $c "serverTLSBootstrap" true -}}
{{- end -}}
{{- with .Values.registerWithTaints -}}
{{- $_ := set $c "registerWithTaints" . -}}
{{- end -}}
{{- $c = mergeOverwrite $c (deepCopy (.Values.config | default dict)) -}}
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
{{ toYaml $c }}
{{- end -}}

{{/*
crivk.hostPorts: the ports the kubelet and its neighbours listen on in the
host's network, which crivk's pod shares (hostNetwork).
*/}}
{{- define "crivk.hostPorts" -}}
"10248": the kubelet's healthz port
"10249": kube-proxy's metrics port
"10250": the kubelet's node API port
"10255": the kubelet's read-only port
"10256": kube-proxy's healthz port
"10257": kube-controller-manager's port
"10258": cloud-controller-manager's port
"10259": kube-scheduler's port
{{- end -}}

{{/*
crivk.profilingAddress: profiling.address:profiling.port, an IPv6 address
in brackets.
*/}}
{{- define "crivk.profilingAddress" -}}
{{- if contains ":" .Values.profiling.address -}}
[{{ .Values.profiling.address }}]:{{ .Values.profiling.port }}
{{- else -}}
{{ .Values.profiling.address }}:{{ .Values.profiling.port }}
{{- end -}}
{{- end -}}

{{/*
crivk.validate fails with a clear message on values that would put crivk
on the kubelet's runtime, directories, cgroups or ports (docs/coexistence.md),
its profiling port on its node API's, or node labels crivk would refuse at
start (the kubelet's rule; the label list is k8s.io/kubelet's KubeletLabels).
*/}}
{{- define "crivk.validate" -}}
{{- if ne (len (splitList "$(MACHINE)" .Values.nodeName)) 2 -}}
{{- fail (printf "nodeName: %q must contain $(MACHINE), the machine's Node name, exactly once: every machine's crivk node needs its own name (default crivk-$(MACHINE))" .Values.nodeName) -}}
{{- end -}}
{{- if not (regexMatch "^([a-z0-9][-a-z0-9.]*)?[$][(]MACHINE[)][-a-z0-9.]*$" .Values.nodeName) -}}
{{- fail (printf "nodeName: %q may hold, besides $(MACHINE), only lower-case letters, digits, '-' and '.', and starts with a letter or digit (a Node name is a DNS subdomain)" .Values.nodeName) -}}
{{- end -}}
{{- $taken := include "crivk.hostPorts" . | fromYaml -}}
{{- $port := int .Values.port -}}
{{- with get $taken (toString $port) -}}
{{- fail (printf "port: %d is %s; give crivk's node API another one (default 10260)" $port .) -}}
{{- end -}}
{{- if .Values.profiling.enabled -}}
{{- if not (regexMatch "^([0-9]{1,3}(\\.[0-9]{1,3}){3}|[0-9a-fA-F.]*:[0-9a-fA-F.]*:[0-9a-fA-F:.]*)$" .Values.profiling.address) -}}
{{- fail (printf "profiling.address: %q is not an IP address; give the address to listen on without the port (profiling.port), e.g. 127.0.0.1" .Values.profiling.address) -}}
{{- end -}}
{{- $pport := int .Values.profiling.port -}}
{{- if eq $pport $port -}}
{{- fail (printf "profiling.port: %d is crivk's node API port (port); give profiling another one (default 10261)" $pport) -}}
{{- end -}}
{{- with get $taken (toString $pport) -}}
{{- fail (printf "profiling.port: %d is %s; give crivk's profiling another one (default 10261)" $pport .) -}}
{{- end -}}
{{- else if .Values.profiling.tracing -}}
{{- fail "profiling.tracing needs profiling.enabled: the traces are served on the profiling port at /debug/tracez" -}}
{{- end -}}
{{- $hport := int .Values.healthzPort -}}
{{- if eq $hport $port -}}
{{- fail (printf "healthzPort: %d is crivk's node API port (port); give /healthz another one (default 10262)" $hport) -}}
{{- end -}}
{{- if and .Values.profiling.enabled (eq $hport (int .Values.profiling.port)) -}}
{{- fail (printf "healthzPort: %d is crivk's profiling port (profiling.port); give /healthz another one (default 10262)" $hport) -}}
{{- end -}}
{{- with get $taken (toString $hport) -}}
{{- fail (printf "healthzPort: %d is %s; give crivk's /healthz another one (default 10262)" $hport .) -}}
{{- end -}}
{{- range $k, $v := .Values.nodeLabels -}}
{{- $ns := regexReplaceAll "/.*$" $k "" -}}
{{- if and (contains "/" $k) (regexMatch "(^|\\.)(kubernetes|k8s)\\.io$" $ns) -}}
{{- if not (or (regexMatch "(^|\\.)(kubelet|node)\\.kubernetes\\.io$" $ns) (has $k (list "kubernetes.io/hostname" "kubernetes.io/os" "kubernetes.io/arch" "beta.kubernetes.io/os" "beta.kubernetes.io/arch" "topology.kubernetes.io/zone" "topology.kubernetes.io/region" "failure-domain.beta.kubernetes.io/zone" "failure-domain.beta.kubernetes.io/region" "node.kubernetes.io/instance-type" "beta.kubernetes.io/instance-type"))) -}}
{{- fail (printf "nodeLabels: %s: a node may not set its own labels in the kubernetes.io and k8s.io namespaces but under node.kubernetes.io/ or kubelet.kubernetes.io/ or a well-known one (the kubelet's rule, which NodeRestriction enforces; crivk would exit at start)" $k) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $sock := trimPrefix "unix://" .Values.criEndpoint -}}
{{- if has $sock (list "/run/containerd/containerd.sock" "/var/run/containerd/containerd.sock") -}}
{{- fail (printf "criEndpoint: %s is the kubelet's containerd, which kills runtime pods it does not know; crivk needs its own (default unix:///run/crivk/containerd/containerd.sock)" .Values.criEndpoint) -}}
{{- end -}}
{{- if hasPrefix "/var/lib/kubelet/" (printf "%s/" (trimSuffix "/" .Values.rootDir)) -}}
{{- fail (printf "rootDir: %s: /var/lib/kubelet is the kubelet's; the kubelet removes pod directories it does not know (default /var/lib/crivk)" .Values.rootDir) -}}
{{- end -}}
{{- if hasPrefix "/var/log/pods/" (printf "%s/" (trimSuffix "/" .Values.podLogDir)) -}}
{{- fail (printf "podLogDir: %s: /var/log/pods is the kubelet's; its container GC removes every directory there of a pod it does not know (default /var/log/crivk-pods)" .Values.podLogDir) -}}
{{- end -}}
{{- if eq .Values.runtime.cniBridge "cni0" "docker0" -}}
{{- fail (printf "runtime.cniBridge: %s is the bridge of containerd's default pod network or Docker's; crivk's pods need their own (default crivk0)" .Values.runtime.cniBridge) -}}
{{- end -}}
{{- if eq .Values.runtime.podCIDR "10.88.0.0/16" -}}
{{- fail "runtime.podCIDR: 10.88.0.0/16 is the subnet of containerd's default pod network, which the kubelet's containerd may use; give crivk's pods their own (default 10.89.0.0/16)" -}}
{{- end -}}
{{- if has (trimSuffix "/" .Values.runtime.root) (list "/var/lib/containerd" "/var/lib/kubelet") -}}
{{- fail (printf "runtime.root: %s is the kubelet's containerd's; crivk's needs its own (default /var/lib/crivk-containerd)" .Values.runtime.root) -}}
{{- end -}}
{{- if or (hasKey .Values.nodeLabels "crivk.io/release") (hasKey .Values.nodeLabels "crivk.io/release-namespace") -}}
{{- fail "nodeLabels: crivk.io/release is the chart's own (with crivk.io/release-namespace): the uninstall hooks find the release's nodes by them" -}}
{{- end -}}
{{- if hasPrefix "/kubepods" .Values.cgroupRoot -}}
{{- fail (printf "cgroupRoot: %s is inside the kubelet's cgroup tree; the kubelet destroys pod cgroups it does not know (default /crivk)" .Values.cgroupRoot) -}}
{{- end -}}
{{- $config := .Values.config | default dict -}}
{{- range (list "apiVersion" "kind") -}}
{{- if hasKey $config . -}}
{{- fail (printf "config.%s: config holds the KubeletConfiguration's fields only; the chart writes apiVersion and kind" .) -}}
{{- end -}}
{{- end -}}
{{- if hasKey $config "healthzBindAddress" -}}
{{- fail "config.healthzBindAddress: the chart binds crivk's /healthz to 127.0.0.1, where the DaemonSet's probes ask; its port is the value healthzPort" -}}
{{- end -}}
{{- $own := dict "containerRuntimeEndpoint" "criEndpoint" "podLogsDir" "podLogDir" "cgroupRoot" "cgroupRoot" "failCgroupV1" "failCgroupV1" "port" "port" "healthzPort" "healthzPort" "serverTLSBootstrap" "servingCert" "registerWithTaints" "registerWithTaints" -}}
{{- range $k, $v := $own -}}
{{- if hasKey $config $k -}}
{{- fail (printf "config.%s: written by the chart from the value %s; set that instead (the chart's checks, ports, probes and mounts follow it)" $k $v) -}}
{{- end -}}
{{- end -}}
{{- if hasKey $config "authentication" -}}
{{- if and (kindIs "map" $config.authentication) (hasKey $config.authentication "x509") -}}
{{- if and (kindIs "map" $config.authentication.x509) (hasKey $config.authentication.x509 "clientCAFile") -}}
{{- fail "config.authentication.x509.clientCAFile: written by the chart from the value clientCAFile; set that instead" -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
