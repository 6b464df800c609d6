{{/* Names */}}
{{- define "ff.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "ff.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "ff.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ff.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: {{ .Values.role }}
{{- end -}}

{{- define "ff.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "ff.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* The image: no default repository, because none is published. Build it (make image) and push it
to a registry the clusters pull from (docs/install.md "The image"). */}}
{{- define "ff.image" -}}
{{- $repository := required "image.repository is required: build the image (make image IMAGE=REGISTRY/flink-failover), push it (make image-push IMAGE=REGISTRY/flink-failover) to a registry your clusters pull from, and set image.repository=REGISTRY/flink-failover (docs/install.md, The image)" .Values.image.repository -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" $repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{- define "ff.tlsSecret" -}}{{ include "ff.fullname" . }}-tls{{- end -}}
{{- define "ff.caSecret" -}}{{ include "ff.fullname" . }}-ca{{- end -}}
{{- define "ff.certgenName" -}}{{ include "ff.fullname" . }}-certgen{{- end -}}
{{/* Names the serving certificate carries besides the Service's, as a JSON list: certificates.extraSANs
and, for a control plane its Karmada API server reaches by controlPlane.webhookURL, that URL's host
(without it the API server refuses the certificate of a webhook it calls by that name). */}}
{{- define "ff.extraSANs" -}}
{{- $sans := list -}}
{{- range .Values.certificates.extraSANs }}{{- $sans = append $sans . -}}{{- end -}}
{{- if and (eq .Values.role "control-plane") .Values.controlPlane.webhookURL -}}
{{- $sans = append $sans (urlParse .Values.controlPlane.webhookURL).hostname -}}
{{- end -}}
{{- $sans | uniq | toJson -}}
{{- end -}}
{{/* The API version the cluster serves ValidatingAdmissionPolicy in: v1 (Kubernetes 1.30+, or what
discovery lists), v1beta1 (1.28 and 1.29 with the ValidatingAdmissionPolicy feature gate and
admissionregistration.k8s.io/v1beta1 enabled, as discovery lists it), or "" when it serves neither (the
backstop is then left out; NOTES says so). `helm template` without a cluster knows no API list: it goes
by the Kubernetes version (--kube-version, by default helm's own). */}}
{{- define "ff.vapVersion" -}}
{{- $v1 := "admissionregistration.k8s.io/v1" -}}
{{- $beta := "admissionregistration.k8s.io/v1beta1" -}}
{{- if .Capabilities.APIVersions.Has (printf "%s/ValidatingAdmissionPolicy" $v1) -}}
{{ $v1 }}
{{- else if .Capabilities.APIVersions.Has (printf "%s/ValidatingAdmissionPolicy" $beta) -}}
{{ $beta }}
{{- else if semverCompare ">=1.30.0-0" .Capabilities.KubeVersion.Version -}}
{{ $v1 }}
{{- end -}}
{{- end -}}
{{- define "ff.policyConfigMap" -}}{{ include "ff.fullname" . }}-policy{{- end -}}
{{- define "ff.webhookConfig" -}}{{ include "ff.fullname" . }}-{{ .Release.Namespace }}{{- end -}}

{{/* The values key of the rendered role's component block (settings are nested per component). */}}
{{- define "ff.component" -}}
{{- if eq .Values.role "control-plane" -}}controlPlane{{- else if eq .Values.role "estimator" -}}estimator{{- else -}}member{{- end -}}
{{- end -}}

{{/* What this release renders (role estimator: only templates/estimator/). */}}
{{- define "ff.renderWorkload" -}}
{{- if ne .Values.role "estimator" -}}
{{- if or (eq .Values.role "member") (ne .Values.controlPlane.part "registration") -}}true{{- end -}}
{{- end -}}
{{- end -}}
{{- define "ff.renderRegistration" -}}
{{- if ne .Values.role "estimator" -}}
{{- if or (eq .Values.role "member") (ne .Values.controlPlane.part "workload") -}}true{{- end -}}
{{- end -}}
{{- end -}}

{{/* Whether this release runs pods (every role but its registration-only and ExternalName variants). */}}
{{- define "ff.renderPods" -}}
{{- if eq .Values.role "estimator" -}}
{{- if not .Values.estimator.externalName -}}true{{- end -}}
{{- else -}}
{{- include "ff.renderWorkload" . -}}
{{- end -}}
{{- end -}}

{{/* role estimator: the Service Karmada's scheduler looks up, <prefix>-<cluster>. Not truncated: a
shortened name is one the scheduler would never find. */}}
{{- define "ff.estimatorService" -}}
{{- $e := .Values.estimator -}}
{{- if not $e.cluster -}}
{{- fail "role estimator needs estimator.cluster (the member cluster's name in Karmada)" -}}
{{- end -}}
{{- $name := printf "%s-%s" $e.servicePrefix $e.cluster -}}
{{- if gt (len $name) 63 -}}
{{- fail (printf "estimator Service name %s (estimator.servicePrefix-estimator.cluster) is longer than 63 characters" $name) -}}
{{- end -}}
{{- $name -}}
{{- end -}}

{{/* The name of the release's pods' Deployment, Service, PDB, NetworkPolicy... */}}
{{- define "ff.workloadName" -}}
{{- if eq .Values.role "estimator" -}}{{ include "ff.estimatorService" . }}{{- else -}}{{ include "ff.fullname" . }}{{- end -}}
{{- end -}}

{{/* webhook timeoutSeconds: above the policy deadline, at most 30 (kube-apiserver's cap). */}}
{{- define "ff.timeoutSeconds" -}}
{{- $webhook := (include "ff.component" . | index .Values).webhook -}}
{{- $deadline := float64 .Values.policy.deadlineSeconds -}}
{{- $timeout := 0 -}}
{{- if kindIs "invalid" $webhook.timeoutSeconds -}}
{{- $timeout = min 30 (add (ceil $deadline | int) (int $webhook.timeoutMarginSeconds)) -}}
{{- else -}}
{{- $timeout = int $webhook.timeoutSeconds -}}
{{- end -}}
{{- if le (float64 $timeout) $deadline -}}
{{- fail (printf "webhook timeoutSeconds %d must be above policy.deadlineSeconds %v" (int $timeout) .Values.policy.deadlineSeconds) -}}
{{- end -}}
{{- $timeout -}}
{{- end -}}

{{/* Namespaces never sent to the webhooks. The member role's own namespace is not among them: Flink
jobs in it are protected like any other (its webhook rules name only Flink kinds, which the product never
creates, so its own objects never reach it). */}}
{{- define "ff.excludedNamespaces" -}}
{{- $ns := list "kube-system" -}}
{{- if ne .Values.role "member" }}{{- $ns = append $ns .Release.Namespace -}}{{- end -}}
{{- range (include "ff.component" . | index .Values).webhook.excludeNamespaces }}{{- $ns = append $ns . -}}{{- end -}}
{{- toJson (uniq $ns) -}}
{{- end -}}

{{/* The failover label's value that triggers the member webhook. */}}
{{- define "ff.trueValues" -}}["true"]{{- end -}}

{{- define "ff.failoverLabel" -}}{{ .Values.policy.prefix }}/failover{{- end -}}

{{/* A webhook name from a label key: DNS labels only, fully qualified. */}}
{{- define "ff.webhookName" -}}
{{- regexReplaceAll "[^a-z0-9-]+" (lower .) "-" | trunc 52 | trimAll "-" -}}.flink-failover.io
{{- end -}}

{{- define "ff.podSecurityContext" -}}
{{- if .Values.podSecurityContext -}}
{{- toYaml .Values.podSecurityContext -}}
{{- else -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
fsGroup: 10001
seccompProfile:
  type: RuntimeDefault
{{- end -}}
{{- end -}}

{{- define "ff.containerSecurityContext" -}}
{{- if .Values.containerSecurityContext -}}
{{- toYaml .Values.containerSecurityContext -}}
{{- else -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
privileged: false
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end -}}
{{- end -}}

{{/* Pod spec fields shared by the certificate Jobs. Args: dict ctx, sa. */}}
{{- define "ff.jobPodSpec" -}}
serviceAccountName: {{ .sa }}
automountServiceAccountToken: true
restartPolicy: OnFailure
securityContext:
  {{- include "ff.podSecurityContext" .ctx | nindent 2 }}
{{- with .ctx.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- $c := include "ff.component" .ctx | index .ctx.Values }}
{{- with $c.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $c.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* Container fields shared by the certificate Jobs. */}}
{{- define "ff.jobContainer" -}}
image: {{ include "ff.image" . }}
imagePullPolicy: {{ .Values.image.pullPolicy }}
securityContext:
  {{- include "ff.containerSecurityContext" . | nindent 2 }}
resources:
  requests:
    cpu: 10m
    memory: 64Mi
  limits:
    cpu: 200m
    memory: 128Mi
{{- end -}}

{{/* The MutatingWebhookConfiguration's metadata, shared by the roles' registrations. */}}
{{- define "ff.webhookConfigMeta" -}}
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: {{ include "ff.webhookConfig" . }}
  labels:
    {{- include "ff.labels" . | nindent 4 }}
  {{- if and (eq .Values.certificates.mode "cert-manager") (not (include "ff.component" . | index .Values).webhook.caBundle) }}
  annotations:
    cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/{{ include "ff.fullname" . }}-tls
  {{- end }}
{{- end -}}

{{/* Who gets the control plane's permissions on the Karmada API server. */}}
{{- define "ff.controlPlaneSubjects" -}}
{{- if .Values.controlPlane.rbacSubjects -}}
{{- toYaml .Values.controlPlane.rbacSubjects }}
{{- else -}}
- kind: ServiceAccount
  name: {{ include "ff.serviceAccountName" . }}
  namespace: {{ .Release.Namespace }}
{{- end -}}
{{- end -}}

{{/* The serving pods' ServiceAccount: created as <fullname> (estimator: <prefix>-<cluster>), or an
existing one by name. */}}
{{- define "ff.serviceAccountName" -}}
{{- $sa := (include "ff.component" . | index .Values).serviceAccount -}}
{{- if $sa.create -}}
{{- $sa.name | default (include "ff.workloadName" .) -}}
{{- else -}}
{{- required (printf "%s.serviceAccount.name is required when serviceAccount.create is false" (include "ff.component" .)) $sa.name -}}
{{- end -}}
{{- end -}}

{{/* The leader election Lease; its timings must keep a single leader (the server checks them too). */}}
{{- define "ff.leaseName" -}}
{{- .Values.controlPlane.leaderElection.leaseName | default (printf "%s-leader" (include "ff.fullname" .)) -}}
{{- end -}}

{{- define "ff.leaderElectionArgs" -}}
{{- $le := .Values.controlPlane.leaderElection -}}
{{- if not (and (lt (float64 $le.retryPeriodSeconds) (float64 $le.renewDeadlineSeconds)) (lt (float64 $le.renewDeadlineSeconds) (float64 $le.leaseDurationSeconds))) -}}
{{- fail (printf "controlPlane.leaderElection: need retryPeriodSeconds (%v) < renewDeadlineSeconds (%v) < leaseDurationSeconds (%v)" $le.retryPeriodSeconds $le.renewDeadlineSeconds $le.leaseDurationSeconds) -}}
{{- end -}}
- --leader-elect
- --lease-name={{ include "ff.leaseName" . }}
- --lease-namespace={{ .Release.Namespace }}
- --lease-duration={{ $le.leaseDurationSeconds }}
- --renew-deadline={{ $le.renewDeadlineSeconds }}
- --retry-period={{ $le.retryPeriodSeconds }}
{{- end -}}

{{/* Pod spec fields every role's Deployment takes from its component block. */}}
{{- define "ff.podPlacement" -}}
{{- $c := include "ff.component" . | index .Values -}}
serviceAccountName: {{ include "ff.serviceAccountName" . }}
{{- if $c.hostNetwork }}
hostNetwork: true
dnsPolicy: ClusterFirstWithHostNet
{{- end }}
{{- with $c.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- include "ff.podSecurityContext" . | nindent 2 }}
topologySpreadConstraints:
  - maxSkew: {{ $c.topologySpread.maxSkew }}
    topologyKey: kubernetes.io/hostname
    whenUnsatisfiable: {{ $c.topologySpread.whenUnsatisfiable }}
    labelSelector:
      matchLabels:
        {{- include "ff.selectorLabels" . | nindent 8 }}
{{- with $c.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $c.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $c.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* The pod template's labels (selector labels + podLabels). */}}
{{- define "ff.podLabels" -}}
{{ include "ff.selectorLabels" . }}
{{- with (include "ff.component" . | index .Values).podLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Whether the member role runs its fencing agent (member.fencing.cluster set, policy.fencing on). */}}
{{- define "ff.memberFencing" -}}
{{- if and (eq .Values.role "member") .Values.member.fencing.cluster .Values.policy.fencing.enabled -}}true{{- end -}}
{{- end -}}

{{/* The member webhook's failurePolicy, refused as Ignore with fencing: a job held for fencing stays held
only while the webhook answers, and Ignore lets every held object through while it is down (the schema
refuses it too; this covers --skip-schema-validation; the server refuses it at start from the env
FLINK_FAILOVER_WEBHOOK_FAILURE_POLICY the Deployment sets from it). */}}
{{- define "ff.memberFailurePolicy" -}}
{{- $policy := .Values.member.webhook.failurePolicy -}}
{{- if and (include "ff.memberFencing" .) (ne $policy "Fail") -}}
{{- fail (printf "member.webhook.failurePolicy %s is refused with fencing on (member.fencing.cluster %s, policy.fencing.enabled): while the webhook is down every job held for fencing would be let through and could run beside its old copy; set member.webhook.failurePolicy: Fail" $policy .Values.member.fencing.cluster) -}}
{{- end -}}
{{- $policy -}}
{{- end -}}

{{/* Whether the member webhook adds the lease keeper to first copies (its own entry): with fencing, the
policy's keeper on and native sidecars not declared off (member.keeper.nativeSidecars). Off everywhere,
the entry would send every job's writes to a webhook that adds nothing. */}}
{{- define "ff.memberKeepsFirstCopies" -}}
{{- if and (include "ff.memberFencing" .) .Values.policy.fencing.keeper.enabled (ne .Values.member.keeper.nativeSidecars "off") -}}true{{- end -}}
{{- end -}}

{{/* Whether the member role writes Kubernetes Events (member.events, and always with its own cluster's API). */}}
{{- define "ff.memberEvents" -}}
{{- if and (eq .Values.role "member") (or .Values.member.events (include "ff.memberReadsApi" .)) -}}true{{- end -}}
{{- end -}}

{{/* Whether the member role reads session clusters (its own API): with fencing, or member.readSessionClusters. */}}
{{- define "ff.memberReadsApi" -}}
{{- if and (eq .Values.role "member") (or (include "ff.memberFencing" .) .Values.member.readSessionClusters) -}}true{{- end -}}
{{- end -}}

{{/* The backstop's test of one job (the CEL path of its spec.job): restored, or held suspended. */}}
{{/* A job that declares no state (webhook/restore/decide.py): upgradeMode stateless (or none) and no
checkpoint or savepoint directory in its flinkConfiguration, flat or nested (the keys of
webhook/common/flink.py CHECKPOINT_DIR_KEYS and SAVEPOINT_DIR_KEYS). dict "spec" "job": CEL paths. */}}
{{- define "ff.declaresNoStateCel" -}}
{{- $c := printf "%s.flinkConfiguration" .spec -}}
{{- $found := list -}}
{{- range list "execution.checkpointing.dir" "state.checkpoints.dir" "state.backend.fs.checkpointdir" "execution.checkpointing.savepoint-dir" "state.savepoints.dir" "savepoints.state.backend.fs.dir" -}}
{{- $parts := splitList "." . -}}
{{- $chain := list -}}
{{- $p := $c -}}
{{- $last := last $parts -}}
{{- range initial $parts -}}{{- $p = printf "%s.%s" $p . -}}{{- $chain = append $chain (printf "has(%s)" $p) -}}{{- end -}}
{{- /* the last key by index: savepoint-dir is no CEL identifier */ -}}
{{- $chain = append $chain (printf "'%s' in %s" $last $p) -}}
{{- $found = append $found (printf "'%s' in %s || (%s)" . $c (join " && " $chain)) -}}
{{- end -}}
(!has({{ .job }}.upgradeMode) || {{ .job }}.upgradeMode == 'stateless') && (!has({{ $c }}) || !({{ join " || " $found }}))
{{- end -}}

{{- define "ff.backstopRestored" -}}
(has({{ . }}.initialSavepointPath) && {{ . }}.initialSavepointPath != '') || (has({{ . }}.state) && {{ . }}.state == 'suspended')
{{- end -}}

{{/* policy.storageOptions: every option name one its backend takes, else the server's message with
the option it most likely meant (the rule of webhook/policy/backend_options.py closest: the same but for case,
_ and -, else the nearest within an edit distance of max(2, len/3), the first of equals). The names
are generated from the server's model into _storage-options.tpl. */}}
{{- define "ff.checkStorageOptions" -}}
{{- $known := include "ff.storageOptionNames" . | fromJson -}}
{{- $problems := list -}}
{{- range $scheme, $options := .Values.policy.storageOptions -}}
{{- $entry := get $known $scheme -}}
{{- if and $entry (kindIs "map" $options) -}}
{{- range $option, $_ := $options -}}
{{- if not (has $option $entry.options) -}}
{{- $hint := include "ff.closestOption" (dict "name" $option "accepted" $entry.options) -}}
{{- $problems = append $problems (printf "%s.%s is not an option of the %s backend%s" $scheme $option $entry.backend (ternary (printf " (did you mean %s?)" $hint) "" (ne $hint ""))) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if $problems -}}
{{- fail (printf "policy.storageOptions: %s" (join "; " $problems)) -}}
{{- end -}}
{{- end -}}

{{- define "ff.closestOption" -}}
{{- $name := .name -}}
{{- $fold := $name | replace "_" "" | replace "-" "" | lower -}}
{{- $found := "" -}}
{{- range .accepted -}}
{{- if and (not $found) (eq (. | replace "_" "" | lower) $fold) -}}{{- $found = . -}}{{- end -}}
{{- end -}}
{{- if not $found -}}
{{- $limit := max 2 (div (len $name) 3) -}}
{{- range .accepted -}}
{{- $d := include "ff.editDistance" (list $name .) | int -}}
{{- if le $d $limit -}}{{- $found = . -}}{{- $limit = sub $d 1 -}}{{- end -}}
{{- end -}}
{{- end -}}
{{- $found -}}
{{- end -}}

{{/* Levenshtein distance of two strings (list A B), one row at a time. */}}
{{- define "ff.editDistance" -}}
{{- $a := index . 0 -}}
{{- $b := index . 1 -}}
{{- $prev := until (int (add (len $b) 1)) -}}
{{- range $i := until (len $a) -}}
{{- $ca := substr $i (int (add $i 1)) $a -}}
{{- $cur := list (add $i 1) -}}
{{- range $j := until (len $b) -}}
{{- $cost := ternary 0 1 (eq $ca (substr $j (int (add $j 1)) $b)) -}}
{{- $cur = append $cur (min (add (index $prev (int (add $j 1))) 1) (add (last $cur) 1) (add (index $prev $j) $cost)) -}}
{{- end -}}
{{- $prev = $cur -}}
{{- end -}}
{{- last $prev -}}
{{- end -}}

{{/* CEL: the object named by the argument (object, oldObject) has its job suspended (a
FlinkBlueGreenDeployment: its template's). */}}
{{- define "ff.suspendedCel" -}}
(has({{ . }}.spec) && ({{ . }}.kind == 'FlinkBlueGreenDeployment' ? (has({{ . }}.spec.template) && has({{ . }}.spec.template.spec) && has({{ . }}.spec.template.spec.job) && has({{ . }}.spec.template.spec.job.state) && {{ . }}.spec.template.spec.job.state == 'suspended') : (has({{ . }}.spec.job) && has({{ . }}.spec.job.state) && {{ . }}.spec.job.state == 'suspended')))
{{- end -}}

{{/* CEL: the object (.obj: object, oldObject) carries annotation .key, not empty. */}}
{{- define "ff.annotatedCel" -}}
(has({{ .obj }}.metadata.annotations) && '{{ .key }}' in {{ .obj }}.metadata.annotations && {{ .obj }}.metadata.annotations['{{ .key }}'] != '')
{{- end -}}

{{/* CEL: the object (.obj) carries a trigger label (what the trigger entries' objectSelectors match). */}}
{{- define "ff.triggeredCel" -}}
{{- $failover := include "ff.failoverLabel" .root -}}
(has({{ .obj }}.metadata.labels) && (('{{ $failover }}' in {{ .obj }}.metadata.labels && {{ .obj }}.metadata.labels['{{ $failover }}'] == 'true')
{{- range (without .root.Values.policy.jobIdLabels $failover) }} || '{{ . }}' in {{ $.obj }}.metadata.labels{{ end }}))
{{- end -}}

{{/* CEL: the object (.obj) is a failover as the webhook reads it (webhook/restore/outcome.py triggered:
the failover label true in any case, or a jobId label), or the trigger entries take it (a jobId label
set empty). */}}
{{- define "ff.failoverCel" -}}
{{- $failover := include "ff.failoverLabel" .root -}}
(has({{ .obj }}.metadata.labels) && (('{{ $failover }}' in {{ .obj }}.metadata.labels && {{ .obj }}.metadata.labels['{{ $failover }}'].matches('^[tT][rR][uU][eE]$'))
{{- range (without .root.Values.policy.jobIdLabels $failover) }} || '{{ . }}' in {{ $.obj }}.metadata.labels{{ end }}))
{{- end -}}

{{/* CEL: the object (.obj) carries label .key (any value). */}}
{{- define "ff.labelledCel" -}}
(has({{ .obj }}.metadata.labels) && '{{ .key }}' in {{ .obj }}.metadata.labels)
{{- end -}}

{{/* CEL: the object named by the argument runs a job (a FlinkBlueGreenDeployment: its template's). */}}
{{- define "ff.runsAJobCel" -}}
(has({{ . }}.spec) && ({{ . }}.kind == 'FlinkBlueGreenDeployment' ? (has({{ . }}.spec.template) && has({{ . }}.spec.template.spec) && has({{ . }}.spec.template.spec.job)) : has({{ . }}.spec.job)))
{{- end -}}

{{/* CEL: the object named by the argument is a FlinkBlueGreenDeployment's child (its owner reference). */}}
{{- define "ff.blueGreenChildCel" -}}
(has({{ . }}.metadata.ownerReferences) && {{ . }}.metadata.ownerReferences.exists(r, r.kind == 'FlinkBlueGreenDeployment'))
{{- end -}}

{{/* CEL: the FlinkDeployment spec at the argument's path sets a checkpoint directory in its
flinkConfiguration, flat or nested (webhook/common/flink.py CHECKPOINT_DIR_KEYS). */}}
{{- define "ff.checkpointDirCel" -}}
{{- $c := printf "%s.flinkConfiguration" . -}}
{{- $found := list -}}
{{- range list "execution.checkpointing.dir" "state.checkpoints.dir" "state.backend.fs.checkpointdir" -}}
{{- $parts := splitList "." . -}}
{{- $chain := list -}}
{{- $p := $c -}}
{{- range initial $parts -}}{{- $p = printf "%s.%s" $p . -}}{{- $chain = append $chain (printf "has(%s)" $p) -}}{{- end -}}
{{- $chain = append $chain (printf "'%s' in %s" (last $parts) $p) -}}
{{- $found = append $found (printf "'%s' in %s || (%s)" . $c (join " && " $chain)) -}}
{{- end -}}
{{- $guards := list -}}
{{- $walk := first (splitList "." .) -}}
{{- range rest (splitList "." $c) -}}{{- $walk = printf "%s.%s" $walk . -}}{{- $guards = append $guards (printf "has(%s)" $walk) -}}{{- end -}}
({{ join " && " $guards }} && ({{ join " || " $found }}))
{{- end -}}

{{/* CEL: oldObject was held for fencing (its hold annotation, suspended). */}}
{{- define "ff.heldCel" -}}
({{ include "ff.annotatedCel" (dict "obj" "oldObject" "key" (printf "%s/hold" .Values.policy.prefix)) }} && {{ include "ff.suspendedCel" "oldObject" }})
{{- end -}}

{{/* The user the fencing agent patches as: the pods' ServiceAccount (the agent runs in the member role's
pods with their token; the webhook learns the same name with a SelfSubjectReview). */}}
{{- define "ff.agentUser" -}}
system:serviceaccount:{{ .Release.Namespace }}:{{ include "ff.serviceAccountName" . }}
{{- end -}}
