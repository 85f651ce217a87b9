{{/*
An image reference from an image root (registry, repository, tag, digest) and the global values:
global.imageRegistry, when set, replaces the registry; a digest wins over a tag.
Usage: include "common.images.image" (dict "imageRoot" .Values.x.image "global" .Values.global)
*/}}
{{- define "common.images.image" -}}
{{- $registry := .imageRoot.registry -}}
{{- if and .global .global.imageRegistry -}}
{{- $registry = .global.imageRegistry -}}
{{- end -}}
{{- $reference := printf "%s" .imageRoot.repository -}}
{{- if $registry -}}
{{- $reference = printf "%s/%s" $registry .imageRoot.repository -}}
{{- end -}}
{{- if .imageRoot.digest -}}
{{- printf "%s@%s" $reference .imageRoot.digest -}}
{{- else if .imageRoot.tag -}}
{{- printf "%s:%s" $reference (toString .imageRoot.tag) -}}
{{- else -}}
{{- $reference -}}
{{- end -}}
{{- end -}}

{{/*
imagePullSecrets from every image's pullSecrets and global.imagePullSecrets, or nothing.
Usage: include "common.images.pullSecrets" (dict "images" (list .Values.x.image) "global" .Values.global)
*/}}
{{- define "common.images.pullSecrets" -}}
{{- $secrets := list -}}
{{- if and .global .global.imagePullSecrets -}}
{{- range .global.imagePullSecrets -}}
{{- $secrets = append $secrets (ternary .name . (kindIs "map" .)) -}}
{{- end -}}
{{- end -}}
{{- range .images -}}
{{- range .pullSecrets -}}
{{- $secrets = append $secrets (ternary .name . (kindIs "map" .)) -}}
{{- end -}}
{{- end -}}
{{- if $secrets }}
imagePullSecrets:
{{- range $secrets | uniq }}
  - name: {{ . }}
{{- end }}
{{- end -}}
{{- end -}}
