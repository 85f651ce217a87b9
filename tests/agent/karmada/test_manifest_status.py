"""The manifestStatuses rules: entries, ordinals, who reports first, and the Events a change of
the entries is worth."""

from __future__ import annotations

from typing import Any

from agent.karmada import names
from agent.karmada.manifest_status import (
    Fitted,
    StatusEvent,
    applied_status,
    by_ordinal,
    fit_status,
    is_first_report,
    status_entry,
    status_events,
    truncated_condition,
)
from agent.karmada.work import parse_manifest

JsonDict = dict[str, Any]

CONFIGMAP = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "web", "namespace": "default"},
}


def entry(ordinal: int, health: str, status: JsonDict | None = None) -> JsonDict:
    return status_entry(parse_manifest(ordinal, CONFIGMAP), "configmaps", status, health)


def test_entry_names_the_manifest_and_carries_status_and_health() -> None:
    assert entry(2, names.HEALTHY, {"ready": 1}) == {
        "identifier": {
            "ordinal": 2,
            "version": "v1",
            "kind": "ConfigMap",
            "resource": "configmaps",
            "namespace": "default",
            "name": "web",
        },
        "status": {"ready": 1},
        "health": names.HEALTHY,
    }
    assert "status" not in entry(0, names.HEALTHY)


def test_by_ordinal_skips_what_is_not_an_entry() -> None:
    first, third = entry(0, names.HEALTHY), entry(2, names.UNHEALTHY)
    assert by_ordinal([first, "junk", {"identifier": {"ordinal": "1"}}, third]) == {
        0: first,
        2: third,
    }
    assert by_ordinal(None) == {}


def test_the_first_report_is_the_one_before_any_applied_condition() -> None:
    work: JsonDict = {"status": {"conditions": [{"type": "Dispatching", "status": "True"}]}}
    assert is_first_report(work)
    assert applied_status(work) is None
    work["status"]["conditions"].append({"type": names.WORK_APPLIED, "status": "False"})
    assert not is_first_report(work)
    assert applied_status(work) == "False"
    assert is_first_report({"status": "not an object"})


def test_events_only_for_what_changed() -> None:
    previous = by_ordinal([entry(0, names.HEALTHY, {"ready": 1})])
    assert status_events(previous, [entry(0, names.HEALTHY, {"ready": 1})]) == []
    assert status_events(previous, [entry(0, names.HEALTHY, {"ready": 2})]) == [
        StatusEvent(
            "Normal",
            names.EVENT_REFLECT_STATUS_SUCCEED,
            "Reflected the status of ConfigMap default/web.",
        )
    ]
    assert status_events(previous, [entry(0, names.UNHEALTHY, {"ready": 1})]) == [
        StatusEvent(
            "Normal",
            names.EVENT_INTERPRET_HEALTH_SUCCEED,
            "Health of ConfigMap default/web is Unhealthy.",
        )
    ]


def test_no_health_event_for_a_kind_whose_health_nothing_judges() -> None:
    asked: list[tuple[str, str]] = []

    def judged_kinds(api_version: str, kind: str) -> bool:
        asked.append((api_version, kind))
        return kind == "Deployment"

    deploy = status_entry(
        parse_manifest(0, {**CONFIGMAP, "apiVersion": "apps/v1", "kind": "Deployment"}),
        "deployments",
        None,
        names.HEALTHY,
    )
    events = status_events({}, [entry(1, names.HEALTHY), deploy], None, judged_kinds)
    assert events == [
        StatusEvent(
            "Normal",
            names.EVENT_INTERPRET_HEALTH_SUCCEED,
            "Health of Deployment default/web is Healthy.",
        )
    ]
    assert asked == [("v1", "ConfigMap"), ("apps/v1", "Deployment")]


def test_unknown_health_is_a_warning_saying_why_when_known() -> None:
    entries = [entry(0, names.UNKNOWN)]
    assert status_events({}, entries, {0: "script failed"}) == [
        StatusEvent(
            "Warning",
            names.EVENT_INTERPRET_HEALTH_FAILED,
            "Health of ConfigMap default/web could not be interpreted: script failed.",
        )
    ]
    assert status_events({}, entries) == [
        StatusEvent(
            "Warning",
            names.EVENT_INTERPRET_HEALTH_FAILED,
            "Health of ConfigMap default/web could not be interpreted from its status.",
        )
    ]


def _work(entries: list[JsonDict], spec_bytes: int = 0) -> JsonDict:
    return {
        "metadata": {"name": "w"},
        "spec": {"blob": "x" * spec_bytes},
        "status": {"conditions": [{"type": "Applied"}], "manifestStatuses": entries},
    }


def test_a_status_that_fits_is_left_as_it_is() -> None:
    entries = [entry(0, names.HEALTHY, {"a": "1"})]
    fitted = fit_status(_work([]), {"manifestStatuses": entries}, 10_000)
    assert fitted == Fitted({"manifestStatuses": entries}, [])
    assert not fitted.truncated


def test_the_largest_reflected_statuses_go_first_until_the_work_fits() -> None:
    entries = [
        entry(i, names.HEALTHY, {"blob": "x" * size}) for i, size in enumerate((300, 900, 600))
    ]
    fitted = fit_status(_work([]), {"manifestStatuses": entries}, 1700)
    kept = fitted.status["manifestStatuses"]
    assert [("status" in e) for e in kept] == [True, False, True]
    assert [e["health"] for e in kept] == [names.HEALTHY] * 3
    assert fitted.left_out == ["manifest 1 (ConfigMap default/web)"]
    condition = truncated_condition(fitted)
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "StatusTruncated",
        "True",
        "StatusTooLarge",
    )
    assert (
        "the reflected status of manifest 1 (ConfigMap default/web) is left out"
        in (condition["message"])
    )


def test_without_room_for_the_entries_only_the_conditions_stay() -> None:
    entries = [entry(0, names.HEALTHY, {"blob": "x" * 100})]
    fitted = fit_status(_work([], spec_bytes=5000), {"manifestStatuses": entries}, 5000)
    assert fitted.status == {"manifestStatuses": None}
    assert fitted.without_entries
    assert truncated_condition(fitted)["message"].startswith("manifestStatuses are left out")


def test_floor_leaves_out_every_reflected_status_whatever_the_estimate() -> None:
    entries = [entry(i, names.HEALTHY, {"a": str(i)}) for i in range(2)]
    fitted = fit_status(_work([]), {"manifestStatuses": entries}, 1_000_000, floor=True)
    assert all("status" not in e for e in fitted.status["manifestStatuses"])
    assert len(fitted.left_out) == 2


def test_the_entries_already_on_the_work_count_when_only_conditions_are_written() -> None:
    entries = [entry(0, names.HEALTHY, {"blob": "x" * 2000})]
    fitted = fit_status(_work(entries), {"conditions": [{"type": "Applied"}]}, 1000)
    assert fitted.left_out == ["manifest 0 (ConfigMap default/web)"]
    assert "status" not in fitted.status["manifestStatuses"][0]
