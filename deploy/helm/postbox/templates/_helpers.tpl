{{/* The release's resource name: the release name, with "-postbox" unless the release is named postbox. */}}
{{- define "postbox.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Labels selecting the relay's pods. app.kubernetes.io/name is the scrape job's name. */}}
{{- define "postbox.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "postbox.labels" -}}
{{ include "postbox.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "postbox.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "postbox.secretName" -}}
{{ .Values.secret.existingSecret | default (include "postbox.fullname" .) }}
{{- end -}}

{{/*
The key of a secret value. Call with a dict: root, key (the value's key setting), value (the value used when the
chart makes the Secret) and default (the key it is stored under then). Empty when nothing is set.
*/}}
{{- define "postbox.secretKey" -}}
{{- if .key -}}
{{ .key }}
{{- else if and (not .root.Values.secret.existingSecret) .value -}}
{{ .default }}
{{- end -}}
{{- end -}}

{{/* The key of each job role's database URL: its own, or dbKey. */}}
{{- define "postbox.migratorDbKey" -}}
{{ include "postbox.secretKey" (dict "root" . "key" .Values.secret.migratorDbKey "value" .Values.secret.migratorDbURL "default" "migrator-db-url") | default .Values.secret.dbKey }}
{{- end -}}
{{- define "postbox.maintainerDbKey" -}}
{{ include "postbox.secretKey" (dict "root" . "key" .Values.secret.maintainerDbKey "value" .Values.secret.maintainerDbURL "default" "maintainer-db-url") | default .Values.secret.dbKey }}
{{- end -}}
{{- define "postbox.webhookSecretKey" -}}
{{ include "postbox.secretKey" (dict "root" . "key" .Values.secret.webhookSecretKey "value" .Values.secret.webhookSecret "default" "webhook-secret") }}
{{- end -}}
{{- define "postbox.walSecretKey" -}}
{{ include "postbox.secretKey" (dict "root" . "key" .Values.secret.walSecretKey "value" .Values.secret.walSecret "default" "wal-secret") }}
{{- end -}}

{{/* An environment variable from the chart's Secret. Call with a dict: root, name (the variable) and key. */}}
{{- define "postbox.secretEnv" -}}
- name: {{ .name }}
  valueFrom:
    secretKeyRef:
      name: {{ include "postbox.secretName" .root }}
      key: {{ .key }}
{{- end -}}

{{/*
The pod of a maintenance Job or CronJob. Call with a dict: root (the chart's context), name (the component),
args (the command line), dbKey (the key of its role's database URL) and resources.
*/}}
{{- define "postbox.jobPod" -}}
{{- $root := .root -}}
metadata:
  labels:
    {{- include "postbox.labels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ .name }}
spec:
  restartPolicy: Never
  automountServiceAccountToken: false
  {{- with $root.Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  securityContext:
    {{- toYaml $root.Values.podSecurityContext | nindent 4 }}
  containers:
    - name: {{ .name }}
      image: {{ include "postbox.image" $root }}
      imagePullPolicy: {{ $root.Values.image.pullPolicy }}
      args:
        {{- toYaml .args | nindent 8 }}
      env:
        {{- include "postbox.secretEnv" (dict "root" $root "name" "POSTBOX_DB" "key" .dbKey) | nindent 8 }}
      securityContext:
        {{- toYaml $root.Values.securityContext | nindent 8 }}
      resources:
        {{- toYaml .resources | nindent 8 }}
{{- end -}}
