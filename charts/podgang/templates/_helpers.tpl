{{/*
Named templates shared by the chart.

The tests render, lint and schema-check the chart with Helm's own engine
(helm-python-sdk): see "For contributors" in charts/podgang/README.md.
*/}}

{{/* Chart name, overridable with nameOverride. */}}
{{- define "podgang.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Fully qualified app name: the release name, plus the chart name unless the release
name already contains it. Truncated to 63 characters (DNS-1123 label).
*/}}
{{- define "podgang.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "podgang.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels every object carries. */}}
{{- define "podgang.commonLabels" -}}
helm.sh/chart: {{ include "podgang.chart" . }}
app.kubernetes.io/name: {{ include "podgang.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: podgang
{{- end -}}

{{/* Webhook: names and labels. */}}
{{- define "podgang.webhook.fullname" -}}
{{- printf "%s-webhook" (include "podgang.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "podgang.webhook.selectorLabels" -}}
app.kubernetes.io/name: {{ include "podgang.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: webhook
{{- end -}}

{{- define "podgang.webhook.labels" -}}
{{ include "podgang.commonLabels" . }}
app.kubernetes.io/component: webhook
{{- end -}}

{{/* The Secret holding the serving certificate (written by the webhook or cert-manager). */}}
{{- define "podgang.webhook.secretName" -}}
{{- printf "%s-webhook-tls" (include "podgang.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "podgang.mutatingWebhookConfigName" -}}
{{- printf "%s-mutate-pods" (include "podgang.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "podgang.validatingWebhookConfigName" -}}
{{- printf "%s-validate-pods" (include "podgang.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Grouper: names and labels. */}}
{{- define "podgang.grouper.fullname" -}}
{{- printf "%s-grouper" (include "podgang.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "podgang.grouper.metricsServiceName" -}}
{{- printf "%s-grouper-metrics" (include "podgang.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "podgang.grouper.selectorLabels" -}}
app.kubernetes.io/name: {{ include "podgang.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: grouper
{{- end -}}

{{- define "podgang.grouper.labels" -}}
{{ include "podgang.commonLabels" . }}
app.kubernetes.io/component: grouper
{{- end -}}

{{/* cert-manager object names. */}}
{{- define "podgang.certManager.selfSignedIssuerName" -}}
{{- printf "%s-selfsigned" (include "podgang.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "podgang.certManager.caName" -}}
{{- printf "%s-ca" (include "podgang.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "podgang.certManager.certificateName" -}}
{{- printf "%s-webhook" (include "podgang.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The container image: repository@digest when a digest is set, else repository:tag. */}}
{{- define "podgang.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/*
Namespaces podgang leaves alone, as a YAML list: .Values.excludedNamespaces plus the
release namespace (podgang's own pods must never wait for podgang).
*/}}
{{- define "podgang.excludedNamespaces" -}}
{{ toYaml (uniq (concat .Values.excludedNamespaces (list .Release.Namespace))) }}
{{- end -}}

{{/*
CEL for the webhooks' matchConditions: only pods for one of our schedulers reach the
webhook, so a podgang outage (or failurePolicy: Fail) never touches any other
scheduler's pods. `object` is the pod for CREATE and for UPDATE (the new pod; a pod's
schedulerName is immutable, so old and new agree); it is null only for DELETE, which
neither webhook registers, and the guard keeps the expression safe if one ever does.
Scheduler names are DNS names (enforced by values.schema.json), so single quotes
cannot break out of the CEL string literals.
*/}}
{{- define "podgang.schedulerMatchExpression" -}}
object != null && has(object.spec.schedulerName) && object.spec.schedulerName in [
{{- range $i, $name := .Values.schedulerNames }}{{ if $i }}, {{ end }}{{ $name | squote }}{{ end -}}
]
{{- end -}}
