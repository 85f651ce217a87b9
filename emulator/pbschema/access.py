"""Access messages: rbac.authorization.k8s.io/v1, authentication.k8s.io/v1,
authorization.k8s.io/v1 and certificates.k8s.io/v1 (see the package docstring for the form)."""

SCHEMA = """
# ---------------------------------------------------------------- rbac.authorization.k8s.io/v1
Role:
  1 metadata ObjectMeta
  2 rules [PolicyRule] !

ClusterRole:
  1 metadata ObjectMeta
  2 rules [PolicyRule] !
  3 aggregationRule AggregationRule *

AggregationRule:
  1 clusterRoleSelectors [LabelSelector]

PolicyRule:
  1 verbs [string] !
  2 apiGroups [string]
  3 resources [string]
  4 resourceNames [string]
  5 nonResourceURLs [string]

RoleBinding:
  1 metadata ObjectMeta
  2 subjects [Subject]
  3 roleRef RoleRef

Subject:
  1 kind !
  2 apiGroup
  3 name !
  4 namespace

RoleRef:
  1 apiGroup !
  2 kind !
  3 name !

# ---------------------------------------------------------------- authorization.k8s.io/v1
SelfSubjectAccessReview:
  1 metadata ObjectMeta
  2 spec SelfSubjectAccessReviewSpec
  3 status SubjectAccessReviewStatus

SelfSubjectAccessReviewSpec:
  1 resourceAttributes ResourceAttributes *
  2 nonResourceAttributes NonResourceAttributes *

SubjectAccessReview:
  1 metadata ObjectMeta
  2 spec SubjectAccessReviewSpec
  3 status SubjectAccessReviewStatus

SubjectAccessReviewSpec:
  1 resourceAttributes ResourceAttributes *
  2 nonResourceAttributes NonResourceAttributes *
  3 user
  4 groups [string]
  5 extra {extra}
  6 uid

ResourceAttributes:
  1 namespace
  2 verb
  3 group
  4 version
  5 resource
  6 subresource
  7 name
  8 fieldSelector FieldSelectorAttributes *
  9 labelSelector LabelSelectorAttributes *

FieldSelectorAttributes:
  1 rawSelector
  2 requirements [FieldSelectorRequirement]

FieldSelectorRequirement:
  1 key !
  2 operator !
  3 values [string]

LabelSelectorAttributes:
  1 rawSelector
  2 requirements [LabelSelectorRequirement]

NonResourceAttributes:
  1 path
  2 verb

SubjectAccessReviewStatus:
  1 allowed bool !
  4 denied bool
  2 reason
  3 evaluationError

SelfSubjectRulesReview:
  1 metadata ObjectMeta
  2 spec SelfSubjectRulesReviewSpec
  3 status SubjectRulesReviewStatus

SelfSubjectRulesReviewSpec:
  1 namespace

SubjectRulesReviewStatus:
  1 resourceRules [ResourceRule] !
  2 nonResourceRules [NonResourceRule] !
  3 incomplete bool !
  4 evaluationError

ResourceRule:
  1 verbs [string] !
  2 apiGroups [string]
  3 resources [string]
  4 resourceNames [string]

NonResourceRule:
  1 verbs [string] !
  2 nonResourceURLs [string]

# ---------------------------------------------------------------- authentication.k8s.io/v1
TokenReview:
  1 metadata ObjectMeta
  2 spec TokenReviewSpec
  3 status TokenReviewStatus

TokenReviewSpec:
  1 token
  2 audiences [string]

TokenReviewStatus:
  1 authenticated bool
  2 user UserInfo
  4 audiences [string]
  3 error

UserInfo:
  1 username
  2 uid
  3 groups [string]
  4 extra {extra}

TokenRequest:
  1 metadata ObjectMeta
  2 spec TokenRequestSpec
  3 status TokenRequestStatus

TokenRequestSpec:
  1 audiences [string] !
  4 expirationSeconds int64 *
  3 boundObjectRef BoundObjectReference *!

BoundObjectReference:
  1 kind
  2 apiVersion
  3 name
  4 uid

TokenRequestStatus:
  1 token !
  2 expirationTimestamp time

SelfSubjectReview:
  1 metadata ObjectMeta
  2 status SelfSubjectReviewStatus

SelfSubjectReviewStatus:
  1 userInfo UserInfo

# ---------------------------------------------------------------- certificates.k8s.io/v1
CertificateSigningRequest:
  1 metadata ObjectMeta
  2 spec CertificateSigningRequestSpec
  3 status CertificateSigningRequestStatus

CertificateSigningRequestSpec:
  1 request bytes !
  7 signerName !
  8 expirationSeconds int32 *
  5 usages [string]
  2 username
  3 uid
  4 groups [string]
  6 extra {extra}

CertificateSigningRequestStatus:
  1 conditions [CertificateSigningRequestCondition]
  2 certificate bytes

CertificateSigningRequestCondition:
  1 type !
  6 status !
  2 reason
  3 message
  4 lastUpdateTime time
  5 lastTransitionTime time
"""

_REVIEWS = ("SelfSubjectAccessReview", "SelfSubjectRulesReview", "SubjectAccessReview")

KINDS = {
    "rbac.authorization.k8s.io/v1": {
        "Role": "Role", "ClusterRole": "ClusterRole",
        "RoleBinding": "RoleBinding", "ClusterRoleBinding": "RoleBinding",
    },
    "authorization.k8s.io/v1": {
        **{kind: kind for kind in _REVIEWS},
        "LocalSubjectAccessReview": "SubjectAccessReview",
    },
    "authentication.k8s.io/v1": {
        kind: kind for kind in ("TokenReview", "TokenRequest", "SelfSubjectReview")
    },
    "certificates.k8s.io/v1": {"CertificateSigningRequest": "CertificateSigningRequest"},
}  # fmt: skip
