"""The phase declarations are the execution plan: the playbook names no phase, each phase runs once,
in the play it declares, in its declared order; a phase is added by adding one role."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml

from ansible_collections.cargoship.engine.plugins.plugin_utils._phases import PLAYS, load_phases, play_steps

REPO = Path(__file__).resolve().parents[2]
OPERATION = "engine-config-sync"


def phases_run(declared, selected=None, check_mode=False, hooks=None):
    """Play -> the phase roles its steps run, in order."""
    return {
        play: [s["role"] for s in play_steps(declared, play, selected, hooks or {}, check_mode) if s["role"] != "hooks"]
        for play in PLAYS
    }


def test_every_declared_phase_runs_exactly_once_in_the_play_it_declares_in_declared_order():
    declared = load_phases(operation=OPERATION)
    orders = [p["order"] for p in declared]
    assert len(orders) == len(set(orders)), "two phases share an order"
    run = phases_run(declared)
    flat = [name for play in PLAYS for name in run[play]]
    assert flat == [p["name"] for p in declared], "each phase once, plays in order, phases in declared order"
    for phase in declared:
        assert phase["name"] in run[phase["play"]]


def test_the_playbook_names_no_phase_and_asks_for_each_play_once_in_order():
    text = (REPO / "playbooks" / "engine_config_sync.yml").read_text()
    asked = re.findall(r"phase_steps', play='(\w+)', stopped=(\w+)", text)
    # Each play once; the finish play a second time, for the phases that run after a failure.
    assert asked == [
        ("prepare", "false"),
        ("controllers", "false"),
        ("workers", "false"),
        ("finish", "engine_config_sync_failed_before"),
        ("finish", "true"),
    ]
    names = {p["name"] for p in load_phases()}
    lookups = re.findall(r"query\('cargoship\.engine\.phase_steps'[^)]*\)", text)
    assert lookups and not any(f"'{name}'" in call for call in lookups for name in names)
    plays = yaml.safe_load(text)
    hosts = {p["name"]: p.get("hosts") for p in plays if "tasks" in p}
    assert list(hosts.values()) == [
        "cargoship_controllers:cargoship_workers",  # the input's validation, on the control host
        "cargoship_controllers:cargoship_workers",
        "cargoship_controllers",
        "cargoship_workers",
        "cargoship_controllers:cargoship_workers",
    ]


def test_a_new_phase_is_added_by_adding_one_role(tmp_path):
    roles = tmp_path / "roles"
    shutil.copytree(REPO / "roles", roles)
    new = roles / "drain_report" / "vars"
    new.mkdir(parents=True)
    (new / "main.yml").write_text(
        yaml.safe_dump(
            {
                "drain_report_phase": {
                    "operation": OPERATION,
                    "order": 13,
                    "play": "finish",
                    "title": "Report drains",
                    "description": "Writes a summary of the drains.",
                    "dry_run": "runs, reads only",
                }
            }
        )
    )
    declared = load_phases(str(roles), operation=OPERATION)
    assert phases_run(declared)["finish"][-1] == "drain_report"
    assert [s["role"] for s in play_steps(declared, "finish", "drain_report", {}, True)] == [
        "disconnect",
        "drain_report",
    ]


def test_a_phase_without_a_play_is_refused(tmp_path):
    roles = tmp_path / "roles"
    (roles / "nowhere" / "vars").mkdir(parents=True)
    (roles / "nowhere" / "vars" / "main.yml").write_text(
        "nowhere_phase: {operation: x, order: 1, title: t, description: d}\n"
    )
    with pytest.raises(ValueError, match="play must be one of prepare, controllers, workers, finish"):
        load_phases(str(roles))


def test_after_a_failure_only_the_phases_that_run_after_one_are_left():
    declared = load_phases(operation=OPERATION)
    steps = {
        play: play_steps(declared, play, None, {"bad": "hooks are not read"}, False, stopped=True) for play in PLAYS
    }
    assert {play: [s["role"] for s in found] for play, found in steps.items()} == {
        "prepare": [],
        "controllers": [],
        "workers": [],
        "finish": ["unlock", "disconnect"],
    }
    # In a dry run the lock release has nothing to release (unassessed): only the clean-up's dry-run path.
    assert [s["role"] for s in play_steps(declared, "finish", None, {}, True, stopped=True)] == ["disconnect"]


def test_cluster_ready_opens_the_finish_play_when_a_per_node_phase_runs():
    declared = load_phases(operation=OPERATION)
    hooks = {"cluster_ready": [{"name": "smoke test", "command": "true"}]}
    assert play_steps(declared, "finish", None, hooks, False)[0]["point"] == "cluster_ready"
    assert all(s["point"] != "cluster_ready" for s in play_steps(declared, "finish", "kubeconfig", hooks, False))
