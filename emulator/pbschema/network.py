"""networking.k8s.io/v1, discovery.k8s.io/v1 and coordination.k8s.io/v1 messages (see the
package docstring for the form)."""

SCHEMA = """
# ---------------------------------------------------------------- networking.k8s.io/v1
Ingress:
  1 metadata ObjectMeta
  2 spec IngressSpec
  3 status IngressStatus

IngressSpec:
  4 ingressClassName string *
  1 defaultBackend IngressBackend *
  2 tls [IngressTLS]
  3 rules [IngressRule]

IngressBackend:
  4 service IngressServiceBackend *
  3 resource TypedLocalObjectReference *

IngressServiceBackend:
  1 name !
  2 port ServiceBackendPort

ServiceBackendPort:
  1 name
  2 number int32

IngressTLS:
  1 hosts [string]
  2 secretName

# IngressRuleValue is embedded in IngressRule: its fields sit in the rule's JSON.
IngressRule:
  1 host
  2 ingressRuleValue IngressRuleValue ^

IngressRuleValue:
  1 http HTTPIngressRuleValue *

HTTPIngressRuleValue:
  1 paths [HTTPIngressPath] !

HTTPIngressPath:
  1 path
  3 pathType string *!
  2 backend IngressBackend

IngressStatus:
  1 loadBalancer IngressLoadBalancerStatus

IngressLoadBalancerStatus:
  1 ingress [IngressLoadBalancerIngress]

IngressLoadBalancerIngress:
  1 ip
  2 hostname
  4 ports [IngressPortStatus]

IngressPortStatus:
  1 port int32 !
  2 protocol !
  3 error string *

IngressClass:
  1 metadata ObjectMeta
  2 spec IngressClassSpec

IngressClassSpec:
  1 controller
  2 parameters IngressClassParametersReference *

IngressClassParametersReference:
  1 apiGroup string *
  2 kind !
  3 name !
  4 scope string *
  5 namespace string *

NetworkPolicy:
  1 metadata ObjectMeta
  2 spec NetworkPolicySpec

NetworkPolicySpec:
  1 podSelector LabelSelector
  2 ingress [NetworkPolicyIngressRule]
  3 egress [NetworkPolicyEgressRule]
  4 policyTypes [string]

NetworkPolicyIngressRule:
  1 ports [NetworkPolicyPort]
  2 from [NetworkPolicyPeer]

NetworkPolicyEgressRule:
  1 ports [NetworkPolicyPort]
  2 to [NetworkPolicyPeer]

NetworkPolicyPeer:
  1 podSelector LabelSelector *
  2 namespaceSelector LabelSelector *
  3 ipBlock IPBlock *

IPBlock:
  1 cidr !
  2 except [string]

NetworkPolicyPort:
  1 protocol string *
  2 port intorstr *
  3 endPort int32 *

# ---------------------------------------------------------------- discovery.k8s.io/v1
EndpointSlice:
  1 metadata ObjectMeta
  4 addressType !
  2 endpoints [SliceEndpoint] !
  3 ports [SliceEndpointPort]

SliceEndpoint:
  1 addresses [string] !
  2 conditions SliceEndpointConditions
  3 hostname string *
  4 targetRef ObjectReference *
  5 deprecatedTopology {string}
  6 nodeName string *
  7 zone string *
  8 hints SliceEndpointHints *

SliceEndpointConditions:
  1 ready bool *
  2 serving bool *
  3 terminating bool *

SliceEndpointHints:
  1 forZones [ForZone]
  2 forNodes [ForNode]

ForZone:
  1 name !

ForNode:
  1 name !

SliceEndpointPort:
  1 name string *
  2 protocol string *
  3 port int32 *
  4 appProtocol string *

# ---------------------------------------------------------------- coordination.k8s.io/v1
Lease:
  1 metadata ObjectMeta
  2 spec LeaseSpec

LeaseSpec:
  1 holderIdentity string *
  2 leaseDurationSeconds int32 *
  3 acquireTime microtime *
  4 renewTime microtime *
  5 leaseTransitions int32 *
  6 strategy string *
  7 preferredHolder string *
"""

KINDS = {
    "networking.k8s.io/v1": {
        "Ingress": "Ingress", "IngressClass": "IngressClass", "NetworkPolicy": "NetworkPolicy",
    },
    "discovery.k8s.io/v1": {"EndpointSlice": "EndpointSlice"},
    "coordination.k8s.io/v1": {"Lease": "Lease"},
}  # fmt: skip
