"""k8s.io/apimachinery/pkg/apis/meta/v1 messages (see the package docstring for the form)."""

SCHEMA = """
ObjectMeta:
  1 name
  2 generateName
  3 namespace
  4 selfLink
  5 uid
  6 resourceVersion
  7 generation int64
  8 creationTimestamp time
  9 deletionTimestamp time *
  10 deletionGracePeriodSeconds int64 *
  11 labels {string}
  12 annotations {string}
  13 ownerReferences [OwnerReference]
  14 finalizers [string]
  17 managedFields [ManagedFieldsEntry]

OwnerReference:
  5 apiVersion !
  1 kind !
  3 name !
  4 uid !
  6 controller bool *
  7 blockOwnerDeletion bool *

ManagedFieldsEntry:
  1 manager
  2 operation
  3 apiVersion
  4 time time *
  6 fieldsType
  7 fieldsV1 raw *
  8 subresource

LabelSelector:
  1 matchLabels {string}
  2 matchExpressions [LabelSelectorRequirement]

LabelSelectorRequirement:
  1 key !
  2 operator !
  3 values [string]

Condition:
  1 type !
  2 status !
  3 observedGeneration int64
  4 lastTransitionTime time !
  5 reason !
  6 message !

DeleteOptions:
  1 gracePeriodSeconds int64 *
  2 preconditions Preconditions *
  3 orphanDependents bool *
  4 propagationPolicy string *
  5 dryRun [string]
  6 ignoreStoreReadErrorWithClusterBreakingPotential bool *

Preconditions:
  1 uid string *
  2 resourceVersion string *
"""

KINDS: dict[str, dict[str, str]] = {}

# metav1.AddToGroupVersion registers the option kinds in every group version.
ANY_VERSION_KINDS = {"DeleteOptions": "DeleteOptions"}
