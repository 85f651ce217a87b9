"""k8s.io/api/core/v1 messages (see the package docstring for the form)."""

SCHEMA = """
# ---------------------------------------------------------------- objects
Namespace:
  1 metadata ObjectMeta
  2 spec NamespaceSpec
  3 status NamespaceStatus

NamespaceSpec:
  1 finalizers [string]

NamespaceStatus:
  1 phase
  2 conditions [NamespaceCondition]

NamespaceCondition:
  1 type !
  2 status !
  4 lastTransitionTime time
  5 reason
  6 message

ConfigMap:
  1 metadata ObjectMeta
  4 immutable bool *
  2 data {string}
  3 binaryData {bytes}

Secret:
  1 metadata ObjectMeta
  5 immutable bool *
  2 data {bytes}
  4 stringData {string}
  3 type

ServiceAccount:
  1 metadata ObjectMeta
  2 secrets [ObjectReference]
  3 imagePullSecrets [LocalObjectReference]
  4 automountServiceAccountToken bool *

Pod:
  1 metadata ObjectMeta
  2 spec PodSpec
  3 status PodStatus

PodTemplate:
  1 metadata ObjectMeta
  2 template PodTemplateSpec

PodTemplateSpec:
  1 metadata ObjectMeta
  2 spec PodSpec

Node:
  1 metadata ObjectMeta
  2 spec NodeSpec
  3 status NodeStatus

Event:
  1 metadata ObjectMeta
  2 involvedObject ObjectReference
  3 reason
  4 message
  5 source EventSource
  6 firstTimestamp time
  7 lastTimestamp time
  8 count int32
  9 type
  10 eventTime microtime
  11 series EventSeries *
  12 action
  13 related ObjectReference *
  14 reportingComponent !
  15 reportingInstance !

EventSeries:
  1 count int32
  2 lastObservedTime microtime

EventSource:
  1 component
  2 host

Endpoints:
  1 metadata ObjectMeta
  2 subsets [EndpointSubset]

EndpointSubset:
  1 addresses [EndpointAddress]
  2 notReadyAddresses [EndpointAddress]
  3 ports [EndpointPort]

EndpointAddress:
  1 ip !
  3 hostname
  4 nodeName string *
  2 targetRef ObjectReference *

EndpointPort:
  1 name
  2 port int32 !
  3 protocol
  4 appProtocol string *

PersistentVolumeClaim:
  1 metadata ObjectMeta
  2 spec PersistentVolumeClaimSpec
  3 status PersistentVolumeClaimStatus

PersistentVolumeClaimSpec:
  1 accessModes [string]
  4 selector LabelSelector *
  2 resources VolumeResourceRequirements
  3 volumeName
  5 storageClassName string *
  6 volumeMode string *
  7 dataSource TypedLocalObjectReference *
  8 dataSourceRef TypedObjectReference *
  9 volumeAttributesClassName string *

PersistentVolumeClaimStatus:
  1 phase
  2 accessModes [string]
  3 capacity {quantity}
  4 conditions [PersistentVolumeClaimCondition]
  5 allocatedResources {quantity}
  7 allocatedResourceStatuses {string}
  8 currentVolumeAttributesClassName string *
  9 modifyVolumeStatus ModifyVolumeStatus *

PersistentVolumeClaimCondition:
  1 type !
  2 status !
  3 lastProbeTime time
  4 lastTransitionTime time
  5 reason
  6 message

ModifyVolumeStatus:
  1 targetVolumeAttributesClassName
  2 status !

PersistentVolumeClaimTemplate:
  1 metadata ObjectMeta
  2 spec PersistentVolumeClaimSpec !

VolumeResourceRequirements:
  1 limits {quantity}
  2 requests {quantity}

PersistentVolume:
  1 metadata ObjectMeta
  2 spec PersistentVolumeSpec
  3 status PersistentVolumeStatus

PersistentVolumeSpec:
  1 capacity {quantity}
  2 persistentVolumeSource PersistentVolumeSource ^
  3 accessModes [string]
  4 claimRef ObjectReference *
  5 persistentVolumeReclaimPolicy
  6 storageClassName
  7 mountOptions [string]
  8 volumeMode string *
  9 nodeAffinity VolumeNodeAffinity *
  10 volumeAttributesClassName string *

PersistentVolumeStatus:
  1 phase
  2 message
  3 reason
  4 lastPhaseTransitionTime time *

VolumeNodeAffinity:
  1 required NodeSelector *

PersistentVolumeSource:
  1 gcePersistentDisk GCEPersistentDiskVolumeSource *
  2 awsElasticBlockStore AWSElasticBlockStoreVolumeSource *
  3 hostPath HostPathVolumeSource *
  4 glusterfs GlusterfsPersistentVolumeSource *
  5 nfs NFSVolumeSource *
  6 rbd RBDPersistentVolumeSource *
  7 iscsi ISCSIPersistentVolumeSource *
  8 cinder CinderPersistentVolumeSource *
  9 cephfs CephFSPersistentVolumeSource *
  10 fc FCVolumeSource *
  11 flocker FlockerVolumeSource *
  12 flexVolume FlexPersistentVolumeSource *
  13 azureFile AzureFilePersistentVolumeSource *
  14 vsphereVolume VsphereVirtualDiskVolumeSource *
  15 quobyte QuobyteVolumeSource *
  16 azureDisk AzureDiskVolumeSource *
  17 photonPersistentDisk PhotonPersistentDiskVolumeSource *
  18 portworxVolume PortworxVolumeSource *
  19 scaleIO ScaleIOPersistentVolumeSource *
  20 local LocalVolumeSource *
  21 storageos StorageOSPersistentVolumeSource *
  22 csi CSIPersistentVolumeSource *

ResourceQuota:
  1 metadata ObjectMeta
  2 spec ResourceQuotaSpec
  3 status ResourceQuotaStatus

ResourceQuotaSpec:
  1 hard {quantity}
  2 scopes [string]
  3 scopeSelector ScopeSelector *

ScopeSelector:
  1 matchExpressions [ScopedResourceSelectorRequirement]

ScopedResourceSelectorRequirement:
  1 scopeName !
  2 operator !
  3 values [string]

ResourceQuotaStatus:
  1 hard {quantity}
  2 used {quantity}

LimitRange:
  1 metadata ObjectMeta
  2 spec LimitRangeSpec

LimitRangeSpec:
  1 limits [LimitRangeItem] !

LimitRangeItem:
  1 type !
  2 max {quantity}
  3 min {quantity}
  4 default {quantity}
  5 defaultRequest {quantity}
  6 maxLimitRequestRatio {quantity}

ReplicationController:
  1 metadata ObjectMeta
  2 spec ReplicationControllerSpec
  3 status ReplicationControllerStatus

ReplicationControllerSpec:
  1 replicas int32 *
  4 minReadySeconds int32
  2 selector {string}
  3 template PodTemplateSpec *

ReplicationControllerStatus:
  1 replicas int32 !
  2 fullyLabeledReplicas int32
  4 readyReplicas int32
  5 availableReplicas int32
  3 observedGeneration int64
  6 conditions [ReplicationControllerCondition]

ReplicationControllerCondition:
  1 type !
  2 status !
  3 lastTransitionTime time
  4 reason
  5 message

# ---------------------------------------------------------------- services
Service:
  1 metadata ObjectMeta
  2 spec ServiceSpec
  3 status ServiceStatus

ServiceSpec:
  1 ports [ServicePort]
  2 selector {string}
  3 clusterIP
  18 clusterIPs [string]
  4 type
  5 externalIPs [string]
  7 sessionAffinity
  8 loadBalancerIP
  9 loadBalancerSourceRanges [string]
  10 externalName
  11 externalTrafficPolicy
  12 healthCheckNodePort int32
  13 publishNotReadyAddresses bool
  14 sessionAffinityConfig SessionAffinityConfig *
  19 ipFamilies [string]
  17 ipFamilyPolicy string *
  20 allocateLoadBalancerNodePorts bool *
  21 loadBalancerClass string *
  22 internalTrafficPolicy string *
  23 trafficDistribution string *

ServicePort:
  1 name
  2 protocol
  6 appProtocol string *
  3 port int32 !
  4 targetPort intorstr
  5 nodePort int32

SessionAffinityConfig:
  1 clientIP ClientIPConfig *

ClientIPConfig:
  1 timeoutSeconds int32 *

ServiceStatus:
  1 loadBalancer LoadBalancerStatus
  2 conditions [Condition]

LoadBalancerStatus:
  1 ingress [LoadBalancerIngress]

LoadBalancerIngress:
  1 ip
  2 hostname
  3 ipMode string *
  4 ports [PortStatus]

PortStatus:
  1 port int32 !
  2 protocol !
  3 error string *

# ---------------------------------------------------------------- references
ObjectReference:
  1 kind
  2 namespace
  3 name
  4 uid
  5 apiVersion
  6 resourceVersion
  7 fieldPath

LocalObjectReference:
  1 name

TypedLocalObjectReference:
  1 apiGroup string *
  2 kind !
  3 name !

TypedObjectReference:
  1 apiGroup string *
  2 kind !
  3 name !
  4 namespace string *

SecretReference:
  1 name
  2 namespace

ObjectFieldSelector:
  1 apiVersion
  2 fieldPath !

ResourceFieldSelector:
  1 containerName
  2 resource !
  3 divisor quantity

ConfigMapKeySelector:
  1 localObjectReference LocalObjectReference ^
  2 key !
  3 optional bool *

SecretKeySelector:
  1 localObjectReference LocalObjectReference ^
  2 key !
  3 optional bool *

FileKeySelector:
  1 volumeName !
  2 path !
  3 key !
  4 optional bool *

# ---------------------------------------------------------------- pod spec
PodSpec:
  1 volumes [Volume]
  20 initContainers [Container]
  2 containers [Container] !
  34 ephemeralContainers [EphemeralContainer]
  3 restartPolicy
  4 terminationGracePeriodSeconds int64 *
  5 activeDeadlineSeconds int64 *
  6 dnsPolicy
  7 nodeSelector {string}
  8 serviceAccountName
  9 serviceAccount
  21 automountServiceAccountToken bool *
  10 nodeName
  11 hostNetwork bool
  12 hostPID bool
  13 hostIPC bool
  27 shareProcessNamespace bool *
  14 securityContext PodSecurityContext *
  15 imagePullSecrets [LocalObjectReference]
  16 hostname
  17 subdomain
  18 affinity Affinity *
  19 schedulerName
  22 tolerations [Toleration]
  23 hostAliases [HostAlias]
  24 priorityClassName
  25 priority int32 *
  26 dnsConfig PodDNSConfig *
  28 readinessGates [PodReadinessGate]
  29 runtimeClassName string *
  30 enableServiceLinks bool *
  31 preemptionPolicy string *
  32 overhead {quantity}
  33 topologySpreadConstraints [TopologySpreadConstraint]
  35 setHostnameAsFQDN bool *
  36 os PodOS *
  37 hostUsers bool *
  38 schedulingGates [PodSchedulingGate]
  39 resourceClaims [PodResourceClaim]
  40 resources ResourceRequirements *
  41 hostnameOverride string *

Container:
  1 name !
  2 image
  3 command [string]
  4 args [string]
  5 workingDir
  6 ports [ContainerPort]
  19 envFrom [EnvFromSource]
  7 env [EnvVar]
  8 resources ResourceRequirements
  23 resizePolicy [ContainerResizePolicy]
  24 restartPolicy string *
  25 restartPolicyRules [ContainerRestartRule]
  9 volumeMounts [VolumeMount]
  21 volumeDevices [VolumeDevice]
  10 livenessProbe Probe *
  11 readinessProbe Probe *
  22 startupProbe Probe *
  12 lifecycle Lifecycle *
  13 terminationMessagePath
  20 terminationMessagePolicy
  14 imagePullPolicy
  15 securityContext SecurityContext *
  16 stdin bool
  17 stdinOnce bool
  18 tty bool

EphemeralContainer:
  1 ephemeralContainerCommon EphemeralContainerCommon ^
  2 targetContainerName

# Go keeps a copy of Container's fields for ephemeral containers: the same message.
EphemeralContainerCommon = Container

ContainerPort:
  1 name
  2 hostPort int32
  3 containerPort int32 !
  4 protocol
  5 hostIP

ContainerResizePolicy:
  1 resourceName !
  2 restartPolicy !

ContainerRestartRule:
  1 action
  2 exitCodes ContainerRestartRuleOnExitCodes *

ContainerRestartRuleOnExitCodes:
  1 operator
  2 values [int32]

EnvFromSource:
  1 prefix
  2 configMapRef ConfigMapEnvSource *
  3 secretRef SecretEnvSource *

ConfigMapEnvSource:
  1 localObjectReference LocalObjectReference ^
  2 optional bool *

SecretEnvSource:
  1 localObjectReference LocalObjectReference ^
  2 optional bool *

EnvVar:
  1 name !
  2 value
  3 valueFrom EnvVarSource *

EnvVarSource:
  1 fieldRef ObjectFieldSelector *
  2 resourceFieldRef ResourceFieldSelector *
  3 configMapKeyRef ConfigMapKeySelector *
  4 secretKeyRef SecretKeySelector *
  5 fileKeyRef FileKeySelector *

ResourceRequirements:
  1 limits {quantity}
  2 requests {quantity}
  3 claims [ResourceClaim]

ResourceClaim:
  1 name !
  2 request

VolumeMount:
  1 name !
  2 readOnly bool
  7 recursiveReadOnly string *
  3 mountPath !
  4 subPath
  5 mountPropagation string *
  6 subPathExpr

VolumeDevice:
  1 name !
  2 devicePath !

Probe:
  1 handler ProbeHandler ^
  2 initialDelaySeconds int32
  3 timeoutSeconds int32
  4 periodSeconds int32
  5 successThreshold int32
  6 failureThreshold int32
  7 terminationGracePeriodSeconds int64 *

ProbeHandler:
  1 exec ExecAction *
  2 httpGet HTTPGetAction *
  3 tcpSocket TCPSocketAction *
  4 grpc GRPCAction *

Lifecycle:
  1 postStart LifecycleHandler *
  2 preStop LifecycleHandler *
  3 stopSignal string *

LifecycleHandler:
  1 exec ExecAction *
  2 httpGet HTTPGetAction *
  3 tcpSocket TCPSocketAction *
  4 sleep SleepAction *

ExecAction:
  1 command [string]

HTTPGetAction:
  1 path
  2 port intorstr
  3 host
  4 scheme
  5 httpHeaders [HTTPHeader]

HTTPHeader:
  1 name !
  2 value !

TCPSocketAction:
  1 port intorstr
  2 host

GRPCAction:
  1 port int32 !
  2 service string *!

SleepAction:
  1 seconds int64 !

SecurityContext:
  1 capabilities Capabilities *
  2 privileged bool *
  3 seLinuxOptions SELinuxOptions *
  10 windowsOptions WindowsSecurityContextOptions *
  4 runAsUser int64 *
  8 runAsGroup int64 *
  5 runAsNonRoot bool *
  6 readOnlyRootFilesystem bool *
  7 allowPrivilegeEscalation bool *
  9 procMount string *
  11 seccompProfile SeccompProfile *
  12 appArmorProfile AppArmorProfile *

Capabilities:
  1 add [string]
  2 drop [string]

SELinuxOptions:
  1 user
  2 role
  3 type
  4 level

WindowsSecurityContextOptions:
  1 gmsaCredentialSpecName string *
  2 gmsaCredentialSpec string *
  3 runAsUserName string *
  4 hostProcess bool *

SeccompProfile:
  1 type !
  2 localhostProfile string *

AppArmorProfile:
  1 type !
  2 localhostProfile string *

PodSecurityContext:
  1 seLinuxOptions SELinuxOptions *
  8 windowsOptions WindowsSecurityContextOptions *
  2 runAsUser int64 *
  6 runAsGroup int64 *
  3 runAsNonRoot bool *
  4 supplementalGroups [int64]
  12 supplementalGroupsPolicy string *
  5 fsGroup int64 *
  7 sysctls [Sysctl]
  9 fsGroupChangePolicy string *
  10 seccompProfile SeccompProfile *
  11 appArmorProfile AppArmorProfile *
  13 seLinuxChangePolicy string *

Sysctl:
  1 name !
  2 value !

Affinity:
  1 nodeAffinity NodeAffinity *
  2 podAffinity PodAffinity *
  3 podAntiAffinity PodAntiAffinity *

NodeAffinity:
  1 requiredDuringSchedulingIgnoredDuringExecution NodeSelector *
  2 preferredDuringSchedulingIgnoredDuringExecution [PreferredSchedulingTerm]

NodeSelector:
  1 nodeSelectorTerms [NodeSelectorTerm] !

NodeSelectorTerm:
  1 matchExpressions [NodeSelectorRequirement]
  2 matchFields [NodeSelectorRequirement]

NodeSelectorRequirement:
  1 key !
  2 operator !
  3 values [string]

PreferredSchedulingTerm:
  1 weight int32 !
  2 preference NodeSelectorTerm

PodAffinity:
  1 requiredDuringSchedulingIgnoredDuringExecution [PodAffinityTerm]
  2 preferredDuringSchedulingIgnoredDuringExecution [WeightedPodAffinityTerm]

PodAntiAffinity:
  1 requiredDuringSchedulingIgnoredDuringExecution [PodAffinityTerm]
  2 preferredDuringSchedulingIgnoredDuringExecution [WeightedPodAffinityTerm]

PodAffinityTerm:
  1 labelSelector LabelSelector *
  2 namespaces [string]
  3 topologyKey !
  4 namespaceSelector LabelSelector *
  5 matchLabelKeys [string]
  6 mismatchLabelKeys [string]

WeightedPodAffinityTerm:
  1 weight int32 !
  2 podAffinityTerm PodAffinityTerm

Toleration:
  1 key
  2 operator
  3 value
  4 effect
  5 tolerationSeconds int64 *

HostAlias:
  1 ip !
  2 hostnames [string]

PodDNSConfig:
  1 nameservers [string]
  2 searches [string]
  3 options [PodDNSConfigOption]

PodDNSConfigOption:
  1 name
  2 value string *

PodReadinessGate:
  1 conditionType !

TopologySpreadConstraint:
  1 maxSkew int32 !
  2 topologyKey !
  3 whenUnsatisfiable !
  4 labelSelector LabelSelector *
  5 minDomains int32 *
  6 nodeAffinityPolicy string *
  7 nodeTaintsPolicy string *
  8 matchLabelKeys [string]

PodOS:
  1 name !

PodSchedulingGate:
  1 name !

PodResourceClaim:
  1 name !
  3 resourceClaimName string *
  4 resourceClaimTemplateName string *

# ---------------------------------------------------------------- volumes
Volume:
  1 name !
  2 volumeSource VolumeSource ^

VolumeSource:
  1 hostPath HostPathVolumeSource *
  2 emptyDir EmptyDirVolumeSource *
  3 gcePersistentDisk GCEPersistentDiskVolumeSource *
  4 awsElasticBlockStore AWSElasticBlockStoreVolumeSource *
  5 gitRepo GitRepoVolumeSource *
  6 secret SecretVolumeSource *
  7 nfs NFSVolumeSource *
  8 iscsi ISCSIVolumeSource *
  9 glusterfs GlusterfsVolumeSource *
  10 persistentVolumeClaim PersistentVolumeClaimVolumeSource *
  11 rbd RBDVolumeSource *
  12 flexVolume FlexVolumeSource *
  13 cinder CinderVolumeSource *
  14 cephfs CephFSVolumeSource *
  15 flocker FlockerVolumeSource *
  16 downwardAPI DownwardAPIVolumeSource *
  17 fc FCVolumeSource *
  18 azureFile AzureFileVolumeSource *
  19 configMap ConfigMapVolumeSource *
  20 vsphereVolume VsphereVirtualDiskVolumeSource *
  21 quobyte QuobyteVolumeSource *
  22 azureDisk AzureDiskVolumeSource *
  23 photonPersistentDisk PhotonPersistentDiskVolumeSource *
  26 projected ProjectedVolumeSource *
  24 portworxVolume PortworxVolumeSource *
  25 scaleIO ScaleIOVolumeSource *
  27 storageos StorageOSVolumeSource *
  28 csi CSIVolumeSource *
  29 ephemeral EphemeralVolumeSource *
  30 image ImageVolumeSource *

HostPathVolumeSource:
  1 path !
  2 type string *

EmptyDirVolumeSource:
  1 medium
  2 sizeLimit quantity *

GCEPersistentDiskVolumeSource:
  1 pdName !
  2 fsType
  3 partition int32
  4 readOnly bool

AWSElasticBlockStoreVolumeSource:
  1 volumeID !
  2 fsType
  3 partition int32
  4 readOnly bool

GitRepoVolumeSource:
  1 repository !
  2 revision
  3 directory

SecretVolumeSource:
  1 secretName
  2 items [KeyToPath]
  3 defaultMode int32 *
  4 optional bool *

KeyToPath:
  1 key !
  2 path !
  3 mode int32 *

NFSVolumeSource:
  1 server !
  2 path !
  3 readOnly bool

ISCSIVolumeSource:
  1 targetPortal !
  2 iqn !
  3 lun int32 !
  4 iscsiInterface
  5 fsType
  6 readOnly bool
  7 portals [string]
  8 chapAuthDiscovery bool
  11 chapAuthSession bool
  10 secretRef LocalObjectReference *
  12 initiatorName string *

ISCSIPersistentVolumeSource:
  1 targetPortal !
  2 iqn !
  3 lun int32 !
  4 iscsiInterface
  5 fsType
  6 readOnly bool
  7 portals [string]
  8 chapAuthDiscovery bool
  11 chapAuthSession bool
  10 secretRef SecretReference *
  12 initiatorName string *

GlusterfsVolumeSource:
  1 endpoints !
  2 path !
  3 readOnly bool

GlusterfsPersistentVolumeSource:
  1 endpoints !
  2 path !
  3 readOnly bool
  4 endpointsNamespace string *

PersistentVolumeClaimVolumeSource:
  1 claimName !
  2 readOnly bool

RBDVolumeSource:
  1 monitors [string] !
  2 image !
  3 fsType
  4 pool
  5 user
  6 keyring
  7 secretRef LocalObjectReference *
  8 readOnly bool

RBDPersistentVolumeSource:
  1 monitors [string] !
  2 image !
  3 fsType
  4 pool
  5 user
  6 keyring
  7 secretRef SecretReference *
  8 readOnly bool

FlexVolumeSource:
  1 driver !
  2 fsType
  3 secretRef LocalObjectReference *
  4 readOnly bool
  5 options {string}

FlexPersistentVolumeSource:
  1 driver !
  2 fsType
  3 secretRef SecretReference *
  4 readOnly bool
  5 options {string}

CinderVolumeSource:
  1 volumeID !
  2 fsType
  3 readOnly bool
  4 secretRef LocalObjectReference *

CinderPersistentVolumeSource:
  1 volumeID !
  2 fsType
  3 readOnly bool
  4 secretRef SecretReference *

CephFSVolumeSource:
  1 monitors [string] !
  2 path
  3 user
  4 secretFile
  5 secretRef LocalObjectReference *
  6 readOnly bool

CephFSPersistentVolumeSource:
  1 monitors [string] !
  2 path
  3 user
  4 secretFile
  5 secretRef SecretReference *
  6 readOnly bool

FlockerVolumeSource:
  1 datasetName
  2 datasetUUID

DownwardAPIVolumeSource:
  1 items [DownwardAPIVolumeFile]
  2 defaultMode int32 *

DownwardAPIVolumeFile:
  1 path !
  2 fieldRef ObjectFieldSelector *
  3 resourceFieldRef ResourceFieldSelector *
  4 mode int32 *

FCVolumeSource:
  1 targetWWNs [string]
  2 lun int32 *
  3 fsType
  4 readOnly bool
  5 wwids [string]

AzureFileVolumeSource:
  1 secretName !
  2 shareName !
  3 readOnly bool

AzureFilePersistentVolumeSource:
  1 secretName !
  2 shareName !
  3 readOnly bool
  4 secretNamespace string *

ConfigMapVolumeSource:
  1 localObjectReference LocalObjectReference ^
  2 items [KeyToPath]
  3 defaultMode int32 *
  4 optional bool *

VsphereVirtualDiskVolumeSource:
  1 volumePath !
  2 fsType
  3 storagePolicyName
  4 storagePolicyID

QuobyteVolumeSource:
  1 registry !
  2 volume !
  3 readOnly bool
  4 user
  5 group
  6 tenant

AzureDiskVolumeSource:
  1 diskName !
  2 diskURI !
  3 cachingMode string *
  4 fsType string *
  5 readOnly bool *
  6 kind string *

PhotonPersistentDiskVolumeSource:
  1 pdID !
  2 fsType

ProjectedVolumeSource:
  1 sources [VolumeProjection] !
  2 defaultMode int32 *

VolumeProjection:
  1 secret SecretProjection *
  2 downwardAPI DownwardAPIProjection *
  3 configMap ConfigMapProjection *
  4 serviceAccountToken ServiceAccountTokenProjection *
  5 clusterTrustBundle ClusterTrustBundleProjection *
  6 podCertificate PodCertificateProjection *

SecretProjection:
  1 localObjectReference LocalObjectReference ^
  2 items [KeyToPath]
  4 optional bool *

ConfigMapProjection:
  1 localObjectReference LocalObjectReference ^
  2 items [KeyToPath]
  4 optional bool *

DownwardAPIProjection:
  1 items [DownwardAPIVolumeFile]

ServiceAccountTokenProjection:
  1 audience
  2 expirationSeconds int64 *
  3 path !

ClusterTrustBundleProjection:
  1 name string *
  2 signerName string *
  3 labelSelector LabelSelector *
  5 optional bool *
  4 path !

PodCertificateProjection:
  1 signerName
  2 keyType
  3 maxExpirationSeconds int32 *
  4 credentialBundlePath
  5 keyPath
  6 certificateChainPath

PortworxVolumeSource:
  1 volumeID !
  2 fsType
  3 readOnly bool

ScaleIOVolumeSource:
  1 gateway !
  2 system !
  3 secretRef LocalObjectReference *!
  4 sslEnabled bool
  5 protectionDomain
  6 storagePool
  7 storageMode
  8 volumeName
  9 fsType
  10 readOnly bool

ScaleIOPersistentVolumeSource:
  1 gateway !
  2 system !
  3 secretRef SecretReference *!
  4 sslEnabled bool
  5 protectionDomain
  6 storagePool
  7 storageMode
  8 volumeName
  9 fsType
  10 readOnly bool

StorageOSVolumeSource:
  1 volumeName
  2 volumeNamespace
  3 fsType
  4 readOnly bool
  5 secretRef LocalObjectReference *

StorageOSPersistentVolumeSource:
  1 volumeName
  2 volumeNamespace
  3 fsType
  4 readOnly bool
  5 secretRef ObjectReference *

CSIVolumeSource:
  1 driver !
  2 readOnly bool *
  3 fsType string *
  4 volumeAttributes {string}
  5 nodePublishSecretRef LocalObjectReference *

CSIPersistentVolumeSource:
  1 driver !
  2 volumeHandle !
  3 readOnly bool
  4 fsType
  5 volumeAttributes {string}
  6 controllerPublishSecretRef SecretReference *
  7 nodeStageSecretRef SecretReference *
  8 nodePublishSecretRef SecretReference *
  9 controllerExpandSecretRef SecretReference *
  10 nodeExpandSecretRef SecretReference *

LocalVolumeSource:
  1 path !
  2 fsType string *

EphemeralVolumeSource:
  1 volumeClaimTemplate PersistentVolumeClaimTemplate *

ImageVolumeSource:
  1 reference
  2 pullPolicy

# ---------------------------------------------------------------- pod status
PodStatus:
  17 observedGeneration int64
  1 phase
  2 conditions [PodCondition]
  3 message
  4 reason
  11 nominatedNodeName
  5 hostIP
  16 hostIPs [HostIP]
  6 podIP
  12 podIPs [PodIP]
  7 startTime time *
  10 initContainerStatuses [ContainerStatus]
  8 containerStatuses [ContainerStatus]
  9 qosClass
  13 ephemeralContainerStatuses [ContainerStatus]
  14 resize
  15 resourceClaimStatuses [PodResourceClaimStatus]
  18 extendedResourceClaimStatus PodExtendedResourceClaimStatus *

PodCondition:
  1 type !
  7 observedGeneration int64
  2 status !
  3 lastProbeTime time
  4 lastTransitionTime time
  5 reason
  6 message

HostIP:
  1 ip !

PodIP:
  1 ip !

ContainerStatus:
  1 name !
  2 state ContainerState
  3 lastState ContainerState
  4 ready bool !
  5 restartCount int32 !
  6 image !
  7 imageID !
  8 containerID
  9 started bool *
  10 allocatedResources {quantity}
  11 resources ResourceRequirements *
  12 volumeMounts [VolumeMountStatus]
  13 user ContainerUser *
  14 allocatedResourcesStatus [ResourceStatus]
  15 stopSignal string *

ContainerState:
  1 waiting ContainerStateWaiting *
  2 running ContainerStateRunning *
  3 terminated ContainerStateTerminated *

ContainerStateWaiting:
  1 reason
  2 message

ContainerStateRunning:
  1 startedAt time

ContainerStateTerminated:
  1 exitCode int32 !
  2 signal int32
  3 reason
  4 message
  5 startedAt time
  6 finishedAt time
  7 containerID

VolumeMountStatus:
  1 name !
  2 mountPath !
  3 readOnly bool
  4 recursiveReadOnly string *

ContainerUser:
  1 linux LinuxContainerUser *

LinuxContainerUser:
  1 uid int64 !
  2 gid int64 !
  3 supplementalGroups [int64]

ResourceStatus:
  1 name !
  2 resources [ResourceHealth]

ResourceHealth:
  1 resourceID !
  2 health

PodResourceClaimStatus:
  1 name !
  2 resourceClaimName string *

PodExtendedResourceClaimStatus:
  1 requestMappings [ContainerExtendedResourceRequest] !
  2 resourceClaimName !

ContainerExtendedResourceRequest:
  1 containerName !
  2 resourceName !
  3 requestName !

# ---------------------------------------------------------------- nodes
NodeSpec:
  1 podCIDR
  7 podCIDRs [string]
  3 providerID
  4 unschedulable bool
  5 taints [Taint]
  6 configSource NodeConfigSource *
  2 externalID

Taint:
  1 key !
  2 value
  3 effect !
  4 timeAdded time *

NodeConfigSource:
  2 configMap ConfigMapNodeConfigSource *

ConfigMapNodeConfigSource:
  1 namespace !
  2 name !
  3 uid
  4 resourceVersion
  5 kubeletConfigKey !

NodeStatus:
  1 capacity {quantity}
  2 allocatable {quantity}
  3 phase
  4 conditions [NodeCondition]
  5 addresses [NodeAddress]
  6 daemonEndpoints NodeDaemonEndpoints
  7 nodeInfo NodeSystemInfo
  8 images [ContainerImage]
  9 volumesInUse [string]
  10 volumesAttached [AttachedVolume]
  11 config NodeConfigStatus *
  12 runtimeHandlers [NodeRuntimeHandler]
  13 features NodeFeatures *

NodeCondition:
  1 type !
  2 status !
  3 lastHeartbeatTime time
  4 lastTransitionTime time
  5 reason
  6 message

NodeAddress:
  1 type !
  2 address !

NodeDaemonEndpoints:
  1 kubeletEndpoint DaemonEndpoint

DaemonEndpoint:
  1 Port int32 !

NodeSystemInfo:
  1 machineID !
  2 systemUUID !
  3 bootID !
  4 kernelVersion !
  5 osImage !
  6 containerRuntimeVersion !
  7 kubeletVersion !
  8 kubeProxyVersion !
  9 operatingSystem !
  10 architecture !
  11 swap NodeSwapStatus *

NodeSwapStatus:
  1 capacity int64 *

ContainerImage:
  1 names [string] !
  2 sizeBytes int64

AttachedVolume:
  1 name !
  2 devicePath !

NodeConfigStatus:
  1 assigned NodeConfigSource *
  2 active NodeConfigSource *
  3 lastKnownGood NodeConfigSource *
  4 error

NodeRuntimeHandler:
  1 name !
  2 features NodeRuntimeHandlerFeatures *

NodeRuntimeHandlerFeatures:
  1 recursiveReadOnlyMounts bool *
  2 userNamespaces bool *

NodeFeatures:
  1 supplementalGroupsPolicy bool *
"""

KINDS = {
    "v1": {
        kind: kind
        for kind in (
            "Namespace", "ConfigMap", "Secret", "ServiceAccount", "Pod", "PodTemplate", "Node",
            "Event", "Endpoints", "PersistentVolumeClaim", "PersistentVolume", "ResourceQuota",
            "LimitRange", "ReplicationController", "Service",
        )
    },
}  # fmt: skip
