{{/* Chart name. */}}
{{- define "hookrelay.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Full name: release-chart, or fullnameOverride. Truncated so "-<group>" and the pod ordinal still fit 63 characters. */}}
{{- define "hookrelay.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "hookrelay.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Selector labels of the release (all groups). */}}
{{- define "hookrelay.selectorLabels" -}}
app.kubernetes.io/name: {{ include "hookrelay.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "hookrelay.labels" -}}
helm.sh/chart: {{ include "hookrelay.chart" . }}
{{ include "hookrelay.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: hookrelay
{{- end -}}

{{/* Name of the chart's Secret. */}}
{{- define "hookrelay.secretName" -}}
{{- include "hookrelay.fullname" . -}}
{{- end -}}

{{- define "hookrelay.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "hookrelay.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "hookrelay.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag -}}
{{- if eq $tag "latest" -}}
{{- fail "image.tag: \"latest\" is not allowed; pin a version" -}}
{{- end -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
{{- end -}}

{{/* OTLP endpoint of the pods: the value, else the chart's collector if enabled. */}}
{{- define "hookrelay.otlpEndpoint" -}}
{{- if .Values.tracing.otlpEndpoint -}}
{{- .Values.tracing.otlpEndpoint -}}
{{- else if .Values.otelCollector.enabled -}}
{{- printf "http://%s-otel-collector:4318" (include "hookrelay.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/* PromQL selector of the release's scrape targets. */}}
{{- define "hookrelay.promSelector" -}}
namespace="{{ .Release.Namespace }}", job=~"{{ include "hookrelay.fullname" . }}-.*"
{{- end -}}
