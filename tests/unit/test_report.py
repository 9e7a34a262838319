from __future__ import annotations

import pytest

from ansible_collections.cargoship.engine.plugins.plugin_utils._phases import entry_point, load_phases
from ansible_collections.cargoship.engine.plugins.plugin_utils._report import RunReport, render_text

OPERATION = "engine-config-sync"


def statuses(report):
    return {p["name"]: p["status"] for p in report.as_dict()["phases"]}


def test_phases_come_from_the_roles_declarations_in_order():
    phases = load_phases(operation=OPERATION)
    assert [p["order"] for p in phases] == list(range(1, 13))
    labels = {p["name"]: p["dry_run_label"] for p in phases}
    assert labels["connect"] == "runs, reads only"
    assert labels["sync_worker"] == "reported, not run"  # no declaration: reported, not run
    assert labels["disconnect"] == "runs its own dry-run path"


@pytest.mark.parametrize(
    ("label", "has_assessment", "dry_run", "expected"),
    [
        ("runs, reads only", False, True, "main"),
        ("runs its own dry-run path", False, True, "main"),
        ("reported, not run", True, True, "assess"),
        ("reported, not run", False, True, "none"),
        ("reported, not run", False, False, "main"),
    ],
)
def test_the_dry_run_gate(label, has_assessment, dry_run, expected):
    assert entry_point({"dry_run_label": label, "has_assessment": has_assessment}, dry_run) == expected


def test_dry_run_statuses():
    report = RunReport(OPERATION, dry_run=True)
    report.result("c1", "connect", "Ping", {"ping": "pong"}, "ok")
    report.result(
        "c1",
        "sync_controller",
        "Compare",
        {"changed": True, "changes": [{"path": "/etc/x", "action": "create", "diff": "+a"}]},
        "changed",
    )
    report.result("c1", "sync_controller", "Check-mode module", {"changed": True}, "changed")  # says nothing on its own
    report.result("w1", "sync_worker", "Compare", {"changed": False, "changes": []}, "ok")
    report.result("c1", "kubeconfig", "m", {"cargoship_phase": {"phase": "kubeconfig", "mode": "disabled"}}, "ok")
    result = statuses(report)
    assert result["connect"] == "ran"
    assert result["sync_controller"] == "would run"
    assert result["sync_worker"] == "nothing to do"
    assert result["unlock"] == "unassessed"  # no assessment: the gate never includes it in a dry run
    assert result["kubeconfig"] == "skipped"
    assert result["label_nodes"] == "skipped"  # never reached
    detail = report.as_dict()
    assert detail["work_found"] is True
    unlock = next(p for p in detail["phases"] if p["name"] == "unlock")
    assert set(unlock["hosts"]) == {"c1", "w1"}
    controller = next(p for p in detail["phases"] if p["name"] == "sync_controller")
    assert controller["hosts"]["c1"]["changes"] == [{"file": "/etc/x", "action": "create", "diff": "+a"}]
    assert "a dry run takes no lock" in render_text(detail)


def test_a_failure_marks_its_phase_failed_and_housekeeping_is_not_work():
    report = RunReport(OPERATION, dry_run=True)
    report.result(
        "c1", "lock", "See whether the lock could be taken", {"changed": True, "changes": ["take the lock"]}, "changed"
    )
    assert statuses(report)["lock"] == "would run"
    assert report.as_dict()["work_found"] is False
    report.result("c1", "engine_facts", "Read the engine", {"msg": "refusing to downgrade"}, "failed")
    phase = next(p for p in report.as_dict()["phases"] if p["name"] == "engine_facts")
    assert phase["status"] == "failed"
    assert phase["hosts"]["c1"]["messages"] == ["Read the engine: refusing to downgrade"]


def test_results_outside_any_phase_are_ignored():
    report = RunReport(OPERATION, dry_run=False)
    report.result("c1", None, "Something else", {"changed": True}, "changed")
    assert all(not p["hosts"] or p["status"] == "unassessed" for p in report.as_dict()["phases"])


def test_a_run_refused_for_an_unknown_phase_still_reports_why():
    """cargoship_phase given with -e to a whole run: the input check names the unknown phase, and the report
    (which places each phase by the one selected) must still be made to say so; it failed to be made."""
    report = RunReport(OPERATION, dry_run=True)
    report.selected = "no_such_phase"
    report.result(
        "c1",
        None,
        "Validate",
        {
            "msg": "bad",
            "input_errors": [{"message": "cargoship_phase: unknown phase 'no_such_phase'", "hosts": ["c1"]}],
        },
        "failed",
    )
    detail = report.as_dict()
    assert detail["errors"][0]["message"] == "cargoship_phase: unknown phase 'no_such_phase'"
    assert {p["status"] for p in detail["phases"]} == {"skipped"}
    assert "error: cargoship_phase: unknown phase 'no_such_phase' (c1)" in render_text(detail)


SCHEMA = __import__("pathlib").Path(__file__).resolve().parents[2] / "docs" / "report.schema.json"


def varied_report(dry_run: bool) -> dict:
    """A report with every kind of entry: file changes with diffs, plain changes, a failure, a renamed
    node, a disabled phase, a hook stage."""
    report = RunReport(OPERATION, dry_run=dry_run)
    diff = "--- /etc/rancher/k3s/registries.yaml\n+++ /etc/rancher/k3s/registries.yaml\n-a: 1\n+a: 2\n"
    for host in ("c1", "w1"):
        report.result(host, "connect", "Ping", {"ping": "pong"}, "ok")
        report.result(host, "engine_facts", "Known", {"renamed": {"w1": "worker-1"}}, "ok")
    change = {"path": "/etc/rancher/k3s/registries.yaml", "action": "update", "diff": diff}
    report.result("c1", "sync_controller", "Stage", {"changed": True, "changes": [change, "restart k3s"]}, "changed")
    report.result("w1", "sync_worker", "Drain", {"msg": "drain refused"}, "failed")
    report.result("c1", "kubeconfig", "m", {"cargoship_phase": {"phase": "kubeconfig", "mode": "disabled"}}, "ok")
    report.result("c1", "hooks", "m", {"cargoship_phase": {"phase": "cluster_ready", "changes": ["hook ran"]}}, "ok")
    report.result("c1", "sync_controller", "Compare", {"kept": ["chart values: not in this inventory; x kept"]}, "ok")
    report.result("w2", "connect", "Survey", {"msg": "ssh: connect to host w2 port 22: No route"}, "unreachable")
    report.result(
        "w1", None, "Validate", {"msg": "bad", "input_errors": [{"message": "x: bad", "hosts": ["w1"]}]}, "failed"
    )
    report.run_id = "20261203T000000Z-abcdef"
    return report.as_dict()


def test_the_report_says_which_run_and_version_made_it_and_how_each_host_ended():
    report = varied_report(dry_run=False)
    assert report["run_id"] == "20261203T000000Z-abcdef" and report["version"] == "0.1.0"
    assert report["hosts"] == {"c1": {"status": "ok"}, "w1": {"status": "failed"}, "w2": {"status": "unreachable"}}
    assert report["errors"] == [{"message": "x: bad", "hosts": ["w1"]}]
    sync = next(p for p in report["phases"] if p["name"] == "sync_controller")
    assert sync["hosts"]["c1"]["notes"] == ["chart values: not in this inventory; x kept"]
    text = render_text(report)
    assert "error: x: bad (w1)" in text and "c1: chart values: not in this inventory; x kept" in text


@pytest.mark.parametrize("dry_run", [True, False])
def test_reports_follow_their_published_json_schema(dry_run):
    import json

    import jsonschema

    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    report = varied_report(dry_run)
    assert report["schema_version"] == 1
    jsonschema.validate(report, schema)
    # The schema holds the report to its shape: a report without its version, or with a status no
    # reader knows, is refused.
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({k: v for k, v in report.items() if k != "schema_version"}, schema)
    report["phases"][0]["status"] = "done"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(report, schema)


def test_diffs_are_printed_per_phase_host_and_file():
    from ansible_collections.cargoship.engine.plugins.plugin_utils._report import render_diffs

    text = render_diffs(varied_report(dry_run=True))
    assert text.splitlines()[0] == "# sync_controller on c1: update /etc/rancher/k3s/registries.yaml"
    assert "-a: 1\n+a: 2\n" in text
    assert "restart k3s" not in text  # only file changes have diffs
