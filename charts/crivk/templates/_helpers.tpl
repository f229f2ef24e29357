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
{{- join "," $out -}}
{{- end -}}

{{- define "crivk.taints" -}}
{{- $out := list -}}
{{- range .Values.registerWithTaints -}}
{{- if .value -}}
{{- $out = append $out (printf "%s=%s:%s" .key .value .effect) -}}
{{- else -}}
{{- $out = append $out (printf "%s:%s" .key .effect) -}}
{{- end -}}
{{- end -}}
{{- join "," $out -}}
{{- end -}}

{{/*
crivk.validate fails with a clear message on values that would put crivk
on the kubelet's runtime, directories, cgroups or port (docs/coexistence.md).
*/}}
{{- define "crivk.validate" -}}
{{- if eq (int .Values.port) 10250 -}}
{{- fail "port: 10250 is the kubelet's node API port; give crivk another one (default 10260)" -}}
{{- end -}}
{{- $sock := trimPrefix "unix://" .Values.criEndpoint -}}
{{- if has $sock (list "/run/containerd/containerd.sock" "/var/run/containerd/containerd.sock") -}}
{{- fail (printf "criEndpoint: %s is the kubelet's containerd, which kills runtime pods it does not know; crivk needs its own (default unix:///run/crivk/containerd/containerd.sock)" .Values.criEndpoint) -}}
{{- end -}}
{{- if has (trimSuffix "/" .Values.rootDir) (list "/var/lib/kubelet") -}}
{{- fail "rootDir: /var/lib/kubelet is the kubelet's; the kubelet removes pod directories it does not know (default /var/lib/crivk)" -}}
{{- end -}}
{{- if has (trimSuffix "/" .Values.podLogDir) (list "/var/log/pods") -}}
{{- fail "podLogDir: /var/log/pods is the kubelet's; its container GC removes the logs of pods it does not know (default /var/log/crivk-pods)" -}}
{{- end -}}
{{- if hasPrefix "/kubepods" .Values.cgroupRoot -}}
{{- fail (printf "cgroupRoot: %s is inside the kubelet's cgroup tree; the kubelet destroys pod cgroups it does not know (default /crivk)" .Values.cgroupRoot) -}}
{{- end -}}
{{- end -}}
