{{/*
Helpers of the agentplane chart. The objects keep the names config/default gives them
(agentplane-controller-manager, agentplane-api, ...): the manager finds its facade Service and
the secrets key Secret by those names, so one release runs per cluster.
*/}}

{{/* Labels every object of the release carries. */}}
{{- define "agentplane.labels" -}}
app.kubernetes.io/name: agentplane
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{/* The manager image. */}}
{{- define "agentplane.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* Name of the Secret with the S3 credentials (accessKey, secretKey). */}}
{{- define "agentplane.s3Secret" -}}
{{- if .Values.storage.s3.existingSecret -}}
{{ .Values.storage.s3.existingSecret }}
{{- else -}}
agentplane-s3-credentials
{{- end -}}
{{- end }}

{{/*
The manager's flags from the values, one list item per flag (appended to the flags of
config/manager). A flag is only passed when its value differs from the manager's default.
*/}}
{{- define "agentplane.managerArgs" -}}
- --runtime={{ .Values.runtime }}
{{- with .Values.engine.versions }}
- --engine-versions={{ join "," . }}
{{- end }}
{{- with .Values.engine.defaultVersion }}
- --default-engine-version={{ . }}
{{- end }}
{{- with .Values.engine.image }}
- --engine-image={{ . }}
{{- end }}
{{- with .Values.engine.init }}
- --engine-init={{ join "," . }}
{{- end }}
{{- with .Values.engine.probe }}
- --engine-probe={{ join "," . }}
{{- end }}
{{- range $k, $v := .Values.agents.nodeSelector }}
- --agent-node-selector={{ $k }}={{ $v }}
{{- end }}
{{- range .Values.agents.tolerations }}
- --agent-toleration={{ . }}
{{- end }}
{{- with .Values.agents.runtimeClassName }}
- --agent-runtime-class={{ . }}
{{- end }}
{{- with .Values.agents.seccompProfile }}
- --agent-seccomp-profile={{ . }}
{{- end }}
{{- with .Values.agents.renderingRollout }}
- --rendering-rollout={{ . }}
{{- end }}
{{- if not .Values.agents.networkPolicy.enabled }}
- --agent-network-policy=false
{{- end }}
{{- range $name, $cidrs := .Values.agents.egress }}
{{- range $cidrs }}
- --agent-egress={{ $name }}={{ . }}
{{- end }}
{{- end }}
{{- range .Values.agents.ingressNamespaces }}
- --agent-ingress-namespace={{ . }}
{{- end }}
{{- with .Values.domains.appsDomain }}
- --apps-domain={{ . }}
{{- end }}
{{- with .Values.domains.brand }}
- --brand={{ . }}
{{- end }}
{{- with .Values.domains.ingressClass }}
- --ingress-class={{ . }}
{{- end }}
{{- with .Values.domains.clusterIssuer }}
- --cluster-issuer={{ . }}
{{- end }}
{{- with .Values.domains.gateway }}
{{- if .name }}
- --domain-gateway={{ required "domains.gateway.namespace is required with domains.gateway.name" .namespace }}/{{ .name }}{{ with .sectionName }}/{{ . }}{{ end }}
{{- end }}
{{- end }}
{{- range $provider, $url := .Values.modelProxy.upstreams }}
- --model-proxy-upstream={{ $provider }}={{ $url }}
{{- end }}
{{- if .Values.modelProxy.prices }}
- --model-prices=/etc/agentplane/model-prices/model-prices.yaml
{{- end }}
{{- if eq .Values.storage.type "pvc" }}
- --storage-dir={{ .Values.storage.pvc.mountPath }}
{{- else if eq .Values.storage.type "s3" }}
{{- with .Values.storage.s3 }}
- --s3-endpoint={{ required "storage.s3.endpoint is required with storage.type s3" .endpoint }}
- --s3-bucket={{ required "storage.s3.bucket is required with storage.type s3" .bucket }}
{{- with .region }}
- --s3-region={{ . }}
{{- end }}
{{- with .prefix }}
- --s3-prefix={{ . }}
{{- end }}
{{- if .insecure }}
- --s3-insecure
{{- end }}
{{- end }}
{{- if or .Values.storage.s3.existingSecret .Values.storage.s3.accessKey }}
- --s3-credentials-secret={{ include "agentplane.s3Secret" . }}
{{- end }}
{{- else if ne .Values.storage.type "none" }}
{{- fail "storage.type must be pvc, s3 or none" }}
{{- end }}
{{- if .Values.secretsKey.existingSecret }}
- --secrets-key-file=/etc/agentplane/secrets-key/{{ .Values.secretsKey.existingSecretKey }}
{{- end }}
{{- with .Values.extraArgs }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Volume mounts of the manager container beyond config/manager's. */}}
{{- define "agentplane.volumeMounts" -}}
{{- if eq .Values.storage.type "pvc" }}
- name: storage
  mountPath: {{ .Values.storage.pvc.mountPath }}
{{- end }}
{{- if .Values.secretsKey.existingSecret }}
- name: secrets-key
  mountPath: /etc/agentplane/secrets-key
  readOnly: true
{{- end }}
{{- if .Values.modelProxy.prices }}
- name: model-prices
  mountPath: /etc/agentplane/model-prices
  readOnly: true
{{- end }}
{{- end }}

{{/* Volumes of the manager pod beyond config/manager's. */}}
{{- define "agentplane.volumes" -}}
{{- if eq .Values.storage.type "pvc" }}
- name: storage
  persistentVolumeClaim:
    claimName: {{ .Values.storage.pvc.existingClaim | default "agentplane-storage" }}
{{- end }}
{{- if .Values.secretsKey.existingSecret }}
- name: secrets-key
  secret:
    secretName: {{ .Values.secretsKey.existingSecret }}
    items:
    - key: {{ .Values.secretsKey.existingSecretKey }}
      path: {{ .Values.secretsKey.existingSecretKey }}
{{- end }}
{{- if .Values.modelProxy.prices }}
- name: model-prices
  configMap:
    name: agentplane-model-prices
{{- end }}
{{- end }}

{{/*
The manager pod's annotations: podAnnotations and, with modelProxy.prices, the checksum of the
price table, so a changed table rolls the pods (the manager reads --model-prices at start).
*/}}
{{- define "agentplane.podAnnotations" -}}
{{- $annotations := deepCopy (.Values.podAnnotations | default dict) }}
{{- if .Values.modelProxy.prices }}
{{- $_ := set $annotations "checksum/model-prices" (include "agentplane.modelPrices" . | sha256sum) }}
{{- end }}
{{- with $annotations }}
{{- toYaml . }}
{{- end }}
{{- end }}

{{/* The price table file of modelProxy.prices (--model-prices), the ConfigMap's one key. */}}
{{- define "agentplane.modelPrices" -}}
{{- $_ := required "modelProxy.prices.currency is required with modelProxy.prices" .Values.modelProxy.prices.currency }}
{{- toYaml .Values.modelProxy.prices }}
{{- end }}
