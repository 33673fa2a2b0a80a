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
The scheduler name -> backend map in force, as JSON: .Values.backends (a null value
removes a default entry) plus each of .Values.schedulerNames as NAME: kai (the older
form). Callers: `include "podgang.backends" . | fromJson`.
*/}}
{{- define "podgang.backends" -}}
{{- $map := dict -}}
{{- range $name, $backend := .Values.backends }}{{ if $backend }}{{ $_ := set $map $name $backend }}{{ end }}{{ end -}}
{{- range .Values.schedulerNames }}{{ if not (hasKey $map .) }}{{ $_ := set $map . "kai" }}{{ end }}{{ end -}}
{{- if not $map }}{{ fail "backends: map at least one scheduler name to a backend, e.g. kai-scheduler: kai" }}{{ end -}}
{{- toJson $map -}}
{{- end -}}

{{/*
The backends in force, each once, sorted (JSON list).
*/}}
{{- define "podgang.enabledBackends" -}}
{{- values (include "podgang.backends" . | fromJson) | uniq | sortAlpha | toJson -}}
{{- end -}}

{{/*
The API group of each backend's PodGroups (the resource is `podgroups` in all of them),
and whether the chart can install its CRD (crds.install): native Kubernetes gangs are
built into the apiserver. podgang.backends in Python holds the same facts; a chart test
checks that the two agree.
*/}}
{{- define "podgang.backendApiGroups" -}}
{{- toJson (dict "kai" "scheduling.run.ai" "volcano" "scheduling.volcano.sh" "coscheduling" "scheduling.x-k8s.io" "native" "scheduling.k8s.io") -}}
{{- end -}}

{{/*
The API groups of the enabled backends' PodGroups, for RBAC (JSON list).
*/}}
{{- define "podgang.podgroupApiGroups" -}}
{{- $groups := include "podgang.backendApiGroups" . | fromJson -}}
{{- $out := list -}}
{{- range (include "podgang.enabledBackends" . | fromJsonArray) }}{{ $out = append $out (get $groups .) }}{{ end -}}
{{- toJson $out -}}
{{- end -}}

{{/*
The scheduler names per kind of webhook entry (JSON): "shared" for every backend but
native, "native" for native (its entry also carries nativeNamespaceSelector: native
gangs are opt-in per namespace, because default-scheduler pods are everywhere).
*/}}
{{- define "podgang.webhookSchedulers" -}}
{{- $shared := list -}}{{- $native := list -}}
{{- range $name, $backend := (include "podgang.backends" . | fromJson) }}
{{- if eq $backend "native" }}{{ $native = append $native $name }}{{ else }}{{ $shared = append $shared $name }}{{ end }}
{{- end -}}
{{- toJson (dict "shared" $shared "native" $native) -}}
{{- end -}}

{{/*
CEL for the webhooks' matchConditions: only pods for one of the given schedulers reach
the webhook, so a podgang outage (or failurePolicy: Fail) never touches any other
scheduler's pods. `object` is the pod for CREATE and for UPDATE (the new pod; a pod's
schedulerName is immutable, so old and new agree); it is null only for DELETE, which
neither webhook registers, and the guard keeps the expression safe if one ever does.
Scheduler names are DNS names (enforced by values.schema.json), so single quotes
cannot break out of the CEL string literals. Argument: the list of names.
*/}}
{{- define "podgang.schedulerMatchExpression" -}}
object != null && has(object.spec.schedulerName) && object.spec.schedulerName in [
{{- range $i, $name := . }}{{ if $i }}, {{ end }}{{ $name | squote }}{{ end -}}
]
{{- end -}}

{{/*
The --backend flags of both processes (one per scheduler name), and the kai backend's
defaults (the webhook creates owner-less pods' groups, the grouper the rest).
*/}}
{{- define "podgang.backendArgs" -}}
{{- $args := list -}}
{{- range $name, $backend := (include "podgang.backends" . | fromJson) }}{{ $args = append $args (printf "- --backend=%s=%s" $name $backend) }}{{ end -}}
{{- if has "kai" (include "podgang.enabledBackends" . | fromJsonArray) }}
{{- if ne .Values.kai.defaultQueue "default-queue" }}{{ $args = append $args (printf "- --default-queue=%s" .Values.kai.defaultQueue) }}{{ end -}}
{{- range $kind, $class := .Values.kai.defaultPriorityClasses }}{{ $args = append $args (printf "- --default-priority-class=%s=%s" $kind $class) }}{{ end -}}
{{- range $kind, $value := .Values.kai.defaultPreemptibility }}{{ $args = append $args (printf "- --default-preemptibility=%s=%s" $kind $value) }}{{ end -}}
{{- if ne (.Values.kai.version | default "auto") "auto" }}{{ $args = append $args (printf "- --kai-version=%s" .Values.kai.version) }}{{ end -}}
{{- end -}}
{{- join "\n" $args -}}
{{- end -}}


{{/*
nativeNamespaceSelector as a label selector string (the grouper's --namespace-selector).
*/}}
{{- define "podgang.nativeSelector" -}}
{{- $parts := list -}}
{{- range $key, $value := (include "podgang.nativeNamespaceLabels" . | fromJson) }}{{ $parts = append $parts (printf "%s=%s" $key $value) }}{{ end -}}
{{- join "," $parts -}}
{{- end -}}

{{/*
The namespace labels that opt in to native gangs (JSON): nativeNamespaceSelector, or
podgang.io/native: enabled when it is empty (a map default would merge with the user's).
*/}}
{{- define "podgang.nativeNamespaceLabels" -}}
{{- toJson (.Values.nativeNamespaceSelector | default (dict "podgang.io/native" "enabled")) -}}
{{- end -}}

{{/*
Who may call the webhook's HTTPS port: the API server's addresses (networkPolicy.apiserver.cidrs,
and with networkPolicy.apiserver.lookup the addresses of the default/kubernetes EndpointSlices,
looked up at install and upgrade) as ipBlocks, then networkPolicy.webhookFrom. A YAML list of
NetworkPolicy peers, "" when none is known (`helm template` and Argo CD render without a cluster:
lookup finds nothing there).
*/}}
{{- define "podgang.apiserverPeers" -}}
{{- $cidrs := list -}}
{{- range .Values.networkPolicy.apiserver.cidrs }}{{ $cidrs = append $cidrs . }}{{ end -}}
{{- if .Values.networkPolicy.apiserver.lookup -}}
{{- $slices := lookup "discovery.k8s.io/v1" "EndpointSlice" "default" "" -}}
{{- range ($slices.items | default list) -}}
{{- if eq (index (.metadata.labels | default dict) "kubernetes.io/service-name" | default "") "kubernetes" -}}
{{- $bits := ternary "128" "32" (eq .addressType "IPv6") -}}
{{- range (.endpoints | default list) }}{{ range (.addresses | default list) -}}
{{- $cidrs = append $cidrs (printf "%s/%s" . $bits) -}}
{{- end }}{{ end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- range uniq $cidrs }}
- ipBlock:
    cidr: {{ . }}
{{- end }}
{{- with .Values.networkPolicy.webhookFrom }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
The kinds podgang is taught that its processes read (kinds.declared and kinds.kartaKinds), as
a JSON list of {group, resources}, one entry per API group: the RBAC rules for exactly these
kinds. A kind's resource is its `resource`, else its kind's default plural (the rule of
podgang.kinds.taught.plural_of: customjobs, indexes, policies).
*/}}
{{- define "podgang.taughtKinds" -}}
{{- $groups := dict -}}
{{- range concat .Values.kinds.declared .Values.kinds.kartaKinds -}}
{{- $group := "" -}}
{{- if contains "/" .apiVersion -}}{{- $group = first (splitList "/" .apiVersion) -}}{{- end -}}
{{- $lower := lower .kind -}}
{{- $plural := printf "%ss" $lower -}}
{{- if regexMatch "(s|x|z|ch|sh)$" $lower -}}{{- $plural = printf "%ses" $lower -}}
{{- else if regexMatch "[^aeiou]y$" $lower -}}{{- $plural = printf "%sies" (trimSuffix "y" $lower) -}}{{- end -}}
{{- $resource := .resource | default $plural -}}
{{- $_ := set $groups $group (uniq (append (get $groups $group | default list) $resource)) -}}
{{- end -}}
{{- $out := list -}}
{{- range $group := keys $groups | sortAlpha -}}
{{- $out = append $out (dict "group" $group "resources" (get $groups $group | sortAlpha)) -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/*
The flags that teach both processes the kinds: the kinds ConfigMap's file, and --no-karta.
*/}}
{{- define "podgang.kindsArgs" -}}
{{- if .Values.kinds.declared }}
- --kinds=/etc/podgang/kinds/kinds.yaml
{{- end }}
{{- if not .Values.kinds.karta }}
- --no-karta
{{- end }}
{{- end -}}
