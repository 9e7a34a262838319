from __future__ import annotations

from ansible_collections.cargoship.engine.plugins.plugin_utils._report import RunReport, load_phases, render_text

OPERATION = "engine-config-sync"


def marker(phase, mode=None, changes=(), reason=None):
    return {"cargoship_phase": {"phase": phase, "mode": mode, "changes": list(changes), "reason": reason}}


def statuses(report):
    return {p["name"]: p["status"] for p in report.as_dict()["phases"]}


def test_phases_come_from_the_roles_declarations_in_order():
    phases = load_phases(operation=OPERATION)
    assert [p["order"] for p in phases] == list(range(1, 13))
    labels = {p["name"]: p["dry_run_label"] for p in phases}
    assert labels["connect"] == "runs, reads only"
    assert labels["sync_worker"] == "reported, not run"  # no declaration: reported, not run
    assert labels["disconnect"] == "runs its own dry-run path"


def test_dry_run_statuses():
    report = RunReport(OPERATION, dry_run=True)
    report.result("c1", "m", marker("connect", "run"), "ok")
    report.result("c1", "m", marker("sync_controller", "assess"), "ok")
    report.result(
        "c1", "Compare", {"changed": True, "changes": [{"path": "/etc/x", "action": "create", "diff": "+a"}]}, "changed"
    )
    report.result("c1", "Check-mode module", {"changed": True}, "changed")  # says nothing on its own in an assessment
    report.result("w1", "m", marker("sync_worker", "assess"), "ok")
    report.result("c1", "m", marker("unlock", "unassessed", reason="no lock"), "ok")
    report.result("c1", "m", marker("kubeconfig", "disabled"), "ok")
    result = statuses(report)
    assert result["connect"] == "ran"
    assert result["sync_controller"] == "would run"
    assert result["sync_worker"] == "nothing to do"
    assert result["unlock"] == "unassessed"
    assert result["kubeconfig"] == "skipped"
    assert result["label_nodes"] == "skipped"  # never reached
    detail = report.as_dict()
    assert detail["work_found"] is True
    controller = next(p for p in detail["phases"] if p["name"] == "sync_controller")
    assert controller["hosts"]["c1"]["changes"] == [{"file": "/etc/x", "action": "create", "diff": "+a"}]
    assert "sync_controller" in render_text(detail)


def test_a_failure_marks_its_phase_failed_and_housekeeping_is_not_work():
    report = RunReport(OPERATION, dry_run=True)
    report.result("c1", "m", marker("lock", "assess", changes=["take the lock"]), "ok")
    assert report.as_dict()["work_found"] is False
    report.result("c1", "m", marker("distro_facts", "run"), "ok")
    report.result("c1", "Stop before a downgrade", {"msg": "refusing to downgrade"}, "failed")
    phase = next(p for p in report.as_dict()["phases"] if p["name"] == "distro_facts")
    assert phase["status"] == "failed"
    assert phase["hosts"]["c1"]["messages"] == ["Stop before a downgrade: refusing to downgrade"]
