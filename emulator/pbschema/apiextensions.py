"""apiextensions.k8s.io/v1 messages (see the package docstring for the form)."""

SCHEMA = """
CustomResourceDefinition:
  1 metadata ObjectMeta
  2 spec CustomResourceDefinitionSpec
  3 status CustomResourceDefinitionStatus

CustomResourceDefinitionSpec:
  1 group !
  3 names CustomResourceDefinitionNames
  4 scope !
  7 versions [CustomResourceDefinitionVersion] !
  9 conversion CustomResourceConversion *
  10 preserveUnknownFields bool

CustomResourceDefinitionNames:
  1 plural !
  2 singular
  3 shortNames [string]
  4 kind !
  5 listKind
  6 categories [string]

CustomResourceDefinitionVersion:
  1 name !
  2 served bool !
  3 storage bool !
  7 deprecated bool
  8 deprecationWarning string *
  4 schema CustomResourceValidation *
  5 subresources CustomResourceSubresources *
  6 additionalPrinterColumns [CustomResourceColumnDefinition]
  9 selectableFields [SelectableField]

SelectableField:
  1 jsonPath !

CustomResourceValidation:
  1 openAPIV3Schema JSONSchemaProps *

CustomResourceSubresources:
  1 status CustomResourceSubresourceStatus *
  2 scale CustomResourceSubresourceScale *

CustomResourceSubresourceStatus:

CustomResourceSubresourceScale:
  1 specReplicasPath !
  2 statusReplicasPath !
  3 labelSelectorPath string *

CustomResourceColumnDefinition:
  1 name !
  2 type !
  3 format
  4 description
  5 priority int32
  6 jsonPath !

CustomResourceConversion:
  1 strategy !
  2 webhook WebhookConversion *

WebhookConversion:
  2 clientConfig WebhookClientConfig *
  3 conversionReviewVersions [string] !

WebhookClientConfig:
  3 url string *
  1 service ServiceReference *
  2 caBundle bytes

ServiceReference:
  1 namespace !
  2 name !
  3 path string *
  4 port int32 *

CustomResourceDefinitionStatus:
  1 conditions [CustomResourceDefinitionCondition]
  2 acceptedNames CustomResourceDefinitionNames
  3 storedVersions [string] !

CustomResourceDefinitionCondition:
  1 type !
  2 status !
  3 lastTransitionTime time
  4 reason
  5 message

JSONSchemaProps:
  1 id
  2 $schema
  3 $ref string *
  4 description
  5 type
  6 format
  7 title
  8 default raw *
  9 maximum double *
  10 exclusiveMaximum bool
  11 minimum double *
  12 exclusiveMinimum bool
  13 maxLength int64 *
  14 minLength int64 *
  15 pattern
  16 maxItems int64 *
  17 minItems int64 *
  18 uniqueItems bool
  19 multipleOf double *
  20 enum [raw]
  21 maxProperties int64 *
  22 minProperties int64 *
  23 required [string]
  24 items orarray *
  25 allOf [JSONSchemaProps]
  26 oneOf [JSONSchemaProps]
  27 anyOf [JSONSchemaProps]
  28 not JSONSchemaProps *
  29 properties {JSONSchemaProps}
  30 additionalProperties orbool *
  31 patternProperties {JSONSchemaProps}
  32 dependencies {orstrings}
  33 additionalItems orbool *
  34 definitions {JSONSchemaProps}
  35 externalDocs ExternalDocumentation *
  36 example raw *
  37 nullable bool
  38 x-kubernetes-preserve-unknown-fields bool *
  39 x-kubernetes-embedded-resource bool
  40 x-kubernetes-int-or-string bool
  41 x-kubernetes-list-map-keys [string]
  42 x-kubernetes-list-type string *
  43 x-kubernetes-map-type string *
  44 x-kubernetes-validations [ValidationRule]

ExternalDocumentation:
  1 description
  2 url

ValidationRule:
  1 rule !
  2 message
  3 messageExpression
  4 reason string *
  5 fieldPath
  6 optionalOldSelf bool *
"""

KINDS = {
    "apiextensions.k8s.io/v1": {"CustomResourceDefinition": "CustomResourceDefinition"},
}
