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

{{/* POSTBOX_DB from the Secret: every command reads its --db from it. */}}
{{- define "postbox.dbEnv" -}}
- name: POSTBOX_DB
  valueFrom:
    secretKeyRef:
      name: {{ include "postbox.secretName" . }}
      key: {{ .Values.secret.dbKey }}
{{- end -}}

{{/*
The pod of a maintenance Job or CronJob. Call with a dict: root (the chart's context), name (the component),
args (the command line) and resources.
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
        {{- include "postbox.dbEnv" $root | nindent 8 }}
      securityContext:
        {{- toYaml $root.Values.securityContext | nindent 8 }}
      resources:
        {{- toYaml .resources | nindent 8 }}
{{- end -}}
