"""events.k8s.io/v1 messages (see the package docstring for the form). Named EventsEvent and
EventsEventSeries here: core/v1 has its own Event and EventSeries."""

SCHEMA = """
EventsEvent:
  1 metadata ObjectMeta
  2 eventTime microtime
  3 series EventsEventSeries *
  4 reportingController
  5 reportingInstance
  6 action
  7 reason
  8 regarding ObjectReference
  9 related ObjectReference *
  10 note
  11 type
  12 deprecatedSource EventSource
  13 deprecatedFirstTimestamp time
  14 deprecatedLastTimestamp time
  15 deprecatedCount int32

EventsEventSeries:
  1 count int32 !
  2 lastObservedTime microtime
"""

KINDS = {"events.k8s.io/v1": {"Event": "EventsEvent"}}
