"""admissionregistration.k8s.io/v1 messages (see the package docstring for the form). Its
WebhookClientConfig and ServiceReference are apiextensions' (same numbers, same JSON)."""

SCHEMA = """
MutatingWebhookConfiguration:
  1 metadata ObjectMeta
  2 webhooks [MutatingWebhook]

MutatingWebhook:
  1 name !
  2 clientConfig WebhookClientConfig
  3 rules [RuleWithOperations]
  4 failurePolicy string *
  9 matchPolicy string *
  5 namespaceSelector LabelSelector *
  11 objectSelector LabelSelector *
  6 sideEffects string *!
  7 timeoutSeconds int32 *
  8 admissionReviewVersions [string] !
  10 reinvocationPolicy string *
  12 matchConditions [MatchCondition]

ValidatingWebhookConfiguration:
  1 metadata ObjectMeta
  2 webhooks [ValidatingWebhook]

ValidatingWebhook:
  1 name !
  2 clientConfig WebhookClientConfig
  3 rules [RuleWithOperations]
  4 failurePolicy string *
  9 matchPolicy string *
  5 namespaceSelector LabelSelector *
  10 objectSelector LabelSelector *
  6 sideEffects string *!
  7 timeoutSeconds int32 *
  8 admissionReviewVersions [string] !
  11 matchConditions [MatchCondition]

RuleWithOperations:
  1 operations [string]
  2 rule Rule ^

Rule:
  1 apiGroups [string]
  2 apiVersions [string]
  3 resources [string]
  4 scope string *

MatchCondition:
  1 name !
  2 expression !
"""

KINDS = {
    "admissionregistration.k8s.io/v1": {
        kind: kind for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
    },
}
