"""Where each node is in its sync window, from the node states the steps return (never task names)."""

from __future__ import annotations

import pytest
import yaml

from ansible_collections.cargoship.engine.plugins.plugin_utils._node_progress import NEXT, NodeProgress, state_of
from ansible_collections.cargoship.engine.plugins.plugin_utils._report import RunReport

OPEN = {"ansible_facts": {"node_sync_state": "draining"}}


def window(progress: NodeProgress, host: str, *states: str) -> None:
    progress.feed(host, OPEN)
    for state in states:
        progress.feed(host, {"node_state": state, "changed": True})


def test_a_node_left_after_its_files_were_written_was_lost_during_the_engine_start():
    progress = NodeProgress()
    window(progress, "w1", "drained", "stopped", "written")
    left = progress.left_mid_sync("RUN1", "-i inv.yml")
    assert left["w1"]["lost_during"] == "the engine start"
    assert left["w1"]["state"] == (
        "Done before: cordoned and drained by this run; engine stopped; new files in place "
        "(the previous ones kept in /var/lib/cargoship/backups)"
    )
    assert (
        "`ansible-playbook -i inv.yml cargoship.engine.recover -e cargoship_run_id=RUN1 --limit w1`"
        in (left["w1"]["resume"])
    )


@pytest.mark.parametrize(("last", "during"), list(NEXT.items()))
def test_every_step_says_what_came_next(last, during):
    progress = NodeProgress()
    window(progress, "c1", *([] if last == "draining" else [last]))
    assert progress.left_mid_sync("R", "-i i")["c1"]["lost_during"] == during


def test_an_uncordon_closes_the_window_and_a_node_never_opened_is_not_followed():
    progress = NodeProgress()
    window(progress, "w1", "drained", "stopped", "written", "started", "ready", "uncordoned")
    progress.feed("w2", {"node_state": "stopped"})  # a step outside any window (no drain opened it)
    assert progress.in_flight == []
    # A failed node put back by its rescue closes its window with the restore's uncordon.
    window(progress, "w3", "drained", "stopped", "restored", "started", "ready", "uncordoned")
    assert progress.in_flight == []


def test_results_without_a_node_state_say_nothing():
    assert state_of({"changed": True, "msg": "Drain the node"}) is None
    assert state_of({"node_state": "exploded"}) is None
    assert state_of("not a dict") is None


def test_the_report_lists_nodes_left_mid_sync_with_the_runs_id():
    report = RunReport("engine-config-sync", dry_run=False)
    report.inventory_args = "-i /srv/inv"
    report.result("c1", "connect", "Name this run", {"ansible_facts": {"connect_run_id": "R42"}}, "ok")
    report.result("w1", "sync_worker", "Open", OPEN, "ok")
    report.result("w1", "sync_worker", "Drain", {"node_state": "drained", "changed": True}, "changed")
    report.result("w2", "sync_worker", "Open", OPEN, "ok")
    report.result("w2", "sync_worker", "Uncordon", {"node_state": "uncordoned", "changed": True}, "changed")
    left = report.as_dict()["nodes_left_mid_sync"]
    assert list(left) == ["w1"]
    assert left["w1"]["lost_during"] == "the engine stop"
    assert "-i /srv/inv cargoship.engine.recover -e cargoship_run_id=R42 --limit w1" in left["w1"]["resume"]


def test_the_role_opens_the_window_with_the_fact_the_tracker_reads():
    """The node_sync role and this module agree on the opening fact, and every step in the window
    returns one of the states the tracker knows."""
    from pathlib import Path

    tasks = yaml.safe_load((Path(__file__).resolve().parents[2] / "roles/node_sync/tasks/main.yml").read_text())
    restart = next(t for t in tasks if "block" in t and "rescue" in t and t.get("when") == "node_sync_restart | bool")
    opener = next(t for t in restart["block"] if "ansible.builtin.set_fact" in t)
    assert state_of({"ansible_facts": opener["ansible.builtin.set_fact"]}) == "draining"
    # After it, the steps that return node states, in the order the tracker tells "what came next" by.
    after = restart["block"][restart["block"].index(opener) + 1 :]
    stateful = (
        "cargoship.engine.cluster_node",
        "cargoship.engine.engine_service",
        "cargoship.engine.engine_config",
        "cargoship.engine.engine_proof",
    )
    steps = [(m.rsplit(".", 1)[1], t[m].get("state", "present")) for t in after for m in t if m in stateful]
    assert steps == [
        # A controller restarted in place is checked safe to stop instead of drained (no node state).
        ("cluster_node", "safe_to_stop"),
        ("cluster_node", "drained"),
        ("engine_service", "stopped"),
        ("engine_config", "present"),
        ("engine_service", "started"),
        ("cluster_node", "ready"),
        ("engine_proof", "present"),
    ]
    # The last step closes the window: the proof, then the stamp and the uncordon in one patch (node_state
    # uncordoned); Ready alone does not uncordon.
    ready = [t["cargoship.engine.cluster_node"] for t in after if "cargoship.engine.cluster_node" in t][-1]
    assert "uncordon" not in ready
    assert list(NEXT) == ["draining", "drained", "stopped", "written", "started", "ready", "restored"]


def test_the_window_states_are_named_once_and_every_module_returns_them_by_name():
    """The modules that return a node_state take it from module_utils/_node_window.py, never spell it."""
    import re
    from pathlib import Path

    from ansible_collections.cargoship.engine.plugins.module_utils import _node_window as window

    assert set(window.NEXT) | {window.UNCORDONED} == set(window.STEPS)
    assert set(window.DONE) <= set(window.STEPS)
    root = Path(__file__).resolve().parents[2] / "plugins"
    spelled = [
        f"{path.relative_to(root)}: {found}"
        for path in sorted(root.rglob("*.py"))
        for found in re.findall(r"""node_state["']?\]?\s*[=:]\s*["'][a-z]+["']""", path.read_text())
    ]
    assert spelled == []
