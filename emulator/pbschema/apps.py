"""Workload messages: apps/v1, batch/v1, autoscaling/v1 and v2, policy/v1 (see the package
docstring for the form)."""

SCHEMA = """
# ---------------------------------------------------------------- apps/v1
Deployment:
  1 metadata ObjectMeta
  2 spec DeploymentSpec
  3 status DeploymentStatus

DeploymentSpec:
  1 replicas int32 *
  2 selector LabelSelector *!
  3 template PodTemplateSpec
  4 strategy DeploymentStrategy
  5 minReadySeconds int32
  6 revisionHistoryLimit int32 *
  7 paused bool
  9 progressDeadlineSeconds int32 *
  10 podReplacementPolicy string *

DeploymentStrategy:
  1 type
  2 rollingUpdate RollingUpdateDeployment *

RollingUpdateDeployment:
  1 maxUnavailable intorstr *
  2 maxSurge intorstr *

DeploymentStatus:
  1 observedGeneration int64
  2 replicas int32
  3 updatedReplicas int32
  7 readyReplicas int32
  4 availableReplicas int32
  5 unavailableReplicas int32
  9 terminatingReplicas int32 *
  6 conditions [DeploymentCondition]
  8 collisionCount int32 *

DeploymentCondition:
  1 type !
  2 status !
  6 lastUpdateTime time
  7 lastTransitionTime time
  4 reason
  5 message

ReplicaSet:
  1 metadata ObjectMeta
  2 spec ReplicaSetSpec
  3 status ReplicaSetStatus

ReplicaSetSpec:
  1 replicas int32 *
  4 minReadySeconds int32
  2 selector LabelSelector *!
  3 template PodTemplateSpec

ReplicaSetStatus:
  1 replicas int32 !
  2 fullyLabeledReplicas int32
  4 readyReplicas int32
  5 availableReplicas int32
  7 terminatingReplicas int32 *
  3 observedGeneration int64
  6 conditions [ReplicaSetCondition]

ReplicaSetCondition:
  1 type !
  2 status !
  3 lastTransitionTime time
  4 reason
  5 message

StatefulSet:
  1 metadata ObjectMeta
  2 spec StatefulSetSpec
  3 status StatefulSetStatus

StatefulSetSpec:
  1 replicas int32 *
  2 selector LabelSelector *!
  3 template PodTemplateSpec
  4 volumeClaimTemplates [PersistentVolumeClaim]
  5 serviceName
  6 podManagementPolicy
  7 updateStrategy StatefulSetUpdateStrategy
  8 revisionHistoryLimit int32 *
  9 minReadySeconds int32
  10 persistentVolumeClaimRetentionPolicy StatefulSetPersistentVolumeClaimRetentionPolicy *
  11 ordinals StatefulSetOrdinals *

StatefulSetUpdateStrategy:
  1 type
  2 rollingUpdate RollingUpdateStatefulSetStrategy *

RollingUpdateStatefulSetStrategy:
  1 partition int32 *
  2 maxUnavailable intorstr *

StatefulSetPersistentVolumeClaimRetentionPolicy:
  1 whenDeleted
  2 whenScaled

StatefulSetOrdinals:
  1 start int32 !

StatefulSetStatus:
  1 observedGeneration int64
  2 replicas int32 !
  3 readyReplicas int32
  4 currentReplicas int32
  5 updatedReplicas int32
  6 currentRevision
  7 updateRevision
  9 collisionCount int32 *
  10 conditions [StatefulSetCondition]
  11 availableReplicas int32 !

StatefulSetCondition:
  1 type !
  2 status !
  3 lastTransitionTime time
  4 reason
  5 message

DaemonSet:
  1 metadata ObjectMeta
  2 spec DaemonSetSpec
  3 status DaemonSetStatus

DaemonSetSpec:
  1 selector LabelSelector *!
  2 template PodTemplateSpec
  3 updateStrategy DaemonSetUpdateStrategy
  4 minReadySeconds int32
  6 revisionHistoryLimit int32 *

DaemonSetUpdateStrategy:
  1 type
  2 rollingUpdate RollingUpdateDaemonSet *

RollingUpdateDaemonSet:
  1 maxUnavailable intorstr *
  2 maxSurge intorstr *

DaemonSetStatus:
  1 currentNumberScheduled int32 !
  2 numberMisscheduled int32 !
  3 desiredNumberScheduled int32 !
  4 numberReady int32 !
  5 observedGeneration int64
  6 updatedNumberScheduled int32
  7 numberAvailable int32
  8 numberUnavailable int32
  9 collisionCount int32 *
  10 conditions [DaemonSetCondition]

DaemonSetCondition:
  1 type !
  2 status !
  3 lastTransitionTime time
  4 reason
  5 message

ControllerRevision:
  1 metadata ObjectMeta
  2 data raw
  3 revision int64 !

# ---------------------------------------------------------------- batch/v1
Job:
  1 metadata ObjectMeta
  2 spec JobSpec
  3 status JobStatus

JobSpec:
  1 parallelism int32 *
  2 completions int32 *
  3 activeDeadlineSeconds int64 *
  11 podFailurePolicy PodFailurePolicy *
  16 successPolicy SuccessPolicy *
  7 backoffLimit int32 *
  12 backoffLimitPerIndex int32 *
  13 maxFailedIndexes int32 *
  4 selector LabelSelector *
  5 manualSelector bool *
  6 template PodTemplateSpec
  8 ttlSecondsAfterFinished int32 *
  9 completionMode string *
  10 suspend bool *
  14 podReplacementPolicy string *
  15 managedBy string *

PodFailurePolicy:
  1 rules [PodFailurePolicyRule] !

PodFailurePolicyRule:
  1 action !
  2 onExitCodes PodFailurePolicyOnExitCodesRequirement *
  3 onPodConditions [PodFailurePolicyOnPodConditionsPattern]

PodFailurePolicyOnExitCodesRequirement:
  1 containerName string *
  2 operator !
  3 values [int32] !

PodFailurePolicyOnPodConditionsPattern:
  1 type !
  2 status !

SuccessPolicy:
  1 rules [SuccessPolicyRule] !

SuccessPolicyRule:
  1 succeededIndexes string *
  2 succeededCount int32 *

JobStatus:
  1 conditions [JobCondition]
  2 startTime time *
  3 completionTime time *
  4 active int32
  5 succeeded int32
  6 failed int32
  11 terminating int32 *
  7 completedIndexes
  10 failedIndexes string *
  8 uncountedTerminatedPods UncountedTerminatedPods *
  9 ready int32 *

JobCondition:
  1 type !
  2 status !
  3 lastProbeTime time
  4 lastTransitionTime time
  5 reason
  6 message

UncountedTerminatedPods:
  1 succeeded [string]
  2 failed [string]

JobTemplateSpec:
  1 metadata ObjectMeta
  2 spec JobSpec

CronJob:
  1 metadata ObjectMeta
  2 spec CronJobSpec
  3 status CronJobStatus

CronJobSpec:
  1 schedule !
  8 timeZone string *
  2 startingDeadlineSeconds int64 *
  3 concurrencyPolicy
  4 suspend bool *
  5 jobTemplate JobTemplateSpec
  6 successfulJobsHistoryLimit int32 *
  7 failedJobsHistoryLimit int32 *

CronJobStatus:
  1 active [ObjectReference]
  4 lastScheduleTime time *
  5 lastSuccessfulTime time *

# ---------------------------------------------------------------- autoscaling
Scale:
  1 metadata ObjectMeta
  2 spec ScaleSpec
  3 status ScaleStatus

ScaleSpec:
  1 replicas int32

ScaleStatus:
  1 replicas int32 !
  2 selector

HorizontalPodAutoscaler:
  1 metadata ObjectMeta
  2 spec HorizontalPodAutoscalerSpec
  3 status HorizontalPodAutoscalerStatus

HorizontalPodAutoscalerSpec:
  1 scaleTargetRef CrossVersionObjectReference
  2 minReplicas int32 *
  3 maxReplicas int32 !
  4 metrics [MetricSpec]
  5 behavior HorizontalPodAutoscalerBehavior *

CrossVersionObjectReference:
  1 kind !
  2 name !
  3 apiVersion

HorizontalPodAutoscalerBehavior:
  1 scaleUp HPAScalingRules *
  2 scaleDown HPAScalingRules *

HPAScalingRules:
  3 stabilizationWindowSeconds int32 *
  1 selectPolicy string *
  2 policies [HPAScalingPolicy]
  4 tolerance quantity *

HPAScalingPolicy:
  1 type !
  2 value int32 !
  3 periodSeconds int32 !

MetricSpec:
  1 type !
  2 object ObjectMetricSource *
  3 pods PodsMetricSource *
  4 resource ResourceMetricSource *
  7 containerResource ContainerResourceMetricSource *
  5 external ExternalMetricSource *

ObjectMetricSource:
  1 describedObject CrossVersionObjectReference
  2 target MetricTarget
  3 metric MetricIdentifier

PodsMetricSource:
  1 metric MetricIdentifier
  2 target MetricTarget

ResourceMetricSource:
  1 name !
  2 target MetricTarget

ContainerResourceMetricSource:
  1 name !
  2 target MetricTarget
  3 container !

ExternalMetricSource:
  1 metric MetricIdentifier
  2 target MetricTarget

MetricIdentifier:
  1 name !
  2 selector LabelSelector *

MetricTarget:
  1 type !
  2 value quantity *
  3 averageValue quantity *
  4 averageUtilization int32 *

HorizontalPodAutoscalerStatus:
  1 observedGeneration int64 *
  2 lastScaleTime time *
  3 currentReplicas int32
  4 desiredReplicas int32 !
  5 currentMetrics [MetricStatus] !
  6 conditions [HorizontalPodAutoscalerCondition]

HorizontalPodAutoscalerCondition:
  1 type !
  2 status !
  3 lastTransitionTime time
  4 reason
  5 message
  6 observedGeneration int64

MetricStatus:
  1 type !
  2 object ObjectMetricStatus *
  3 pods PodsMetricStatus *
  4 resource ResourceMetricStatus *
  7 containerResource ContainerResourceMetricStatus *
  5 external ExternalMetricStatus *

ObjectMetricStatus:
  1 metric MetricIdentifier
  2 current MetricValueStatus
  3 describedObject CrossVersionObjectReference

PodsMetricStatus:
  1 metric MetricIdentifier
  2 current MetricValueStatus

ResourceMetricStatus:
  1 name !
  2 current MetricValueStatus

ContainerResourceMetricStatus:
  1 name !
  2 current MetricValueStatus
  3 container !

ExternalMetricStatus:
  1 metric MetricIdentifier
  2 current MetricValueStatus

MetricValueStatus:
  1 value quantity *
  2 averageValue quantity *
  3 averageUtilization int32 *

# ---------------------------------------------------------------- policy/v1
PodDisruptionBudget:
  1 metadata ObjectMeta
  2 spec PodDisruptionBudgetSpec
  3 status PodDisruptionBudgetStatus

PodDisruptionBudgetSpec:
  1 minAvailable intorstr *
  2 selector LabelSelector *
  3 maxUnavailable intorstr *
  4 unhealthyPodEvictionPolicy string *

PodDisruptionBudgetStatus:
  1 observedGeneration int64
  2 disruptedPods {time}
  3 disruptionsAllowed int32 !
  4 currentHealthy int32 !
  5 desiredHealthy int32 !
  6 expectedPods int32 !
  7 conditions [Condition]

Eviction:
  1 metadata ObjectMeta
  2 deleteOptions DeleteOptions *
"""

KINDS = {
    "apps/v1": {
        kind: kind
        for kind in ("Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "ControllerRevision")
    },
    "batch/v1": {"Job": "Job", "CronJob": "CronJob"},
    "autoscaling/v1": {"Scale": "Scale"},
    "autoscaling/v2": {"HorizontalPodAutoscaler": "HorizontalPodAutoscaler"},
    "policy/v1": {"PodDisruptionBudget": "PodDisruptionBudget", "Eviction": "Eviction"},
}
