"""Faults injected into real runs: contention, a planted symlink, a connection cut in the middle of a restart."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml
from helpers import cargoship, disk_full, engine_files, start_cargoship, wait_for

pytestmark = pytest.mark.lab

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def fleet(lab_manager):
    lab = lab_manager.get(hosts=3, controllers=1, engine="k3s", fresh=True)
    desired = yaml.safe_load((REPO / "examples" / "group_vars" / "all.yml").read_text())
    desired.update(cargoship_lock_stale_after=10, cargoship_lock_touch_interval=2)
    (lab.state / "group_vars").mkdir(exist_ok=True)
    (lab.state / "group_vars" / "all.yml").write_text(yaml.safe_dump(desired))
    return lab


def test_two_real_runs_started_together_exactly_one_proceeds_and_keeps_a_users_cordon(fleet):
    fleet.kubectl("cordon", "w2")  # someone else's cordon: the sync drains and restarts w2, and leaves it cordoned
    runs = [start_cargoship("engine-config-sync", "-i", str(fleet.inventory), "--confirm") for _run in range(2)]
    outcomes = sorted((run.wait(timeout=600), run.stderr.read()) for run in runs)
    assert [code for code, _err in outcomes] == [0, 4], outcomes
    assert "locked by run" in outcomes[1][1]
    assert all(fleet.starts(name) == 2 for name in fleet.hosts), "every node restarted exactly once (boot + sync)"
    assert fleet.core.read_node("w2").spec.unschedulable is True
    assert not fleet.core.read_node("w1").spec.unschedulable


def test_a_symlink_planted_at_a_destination_is_refused(fleet):
    fleet.sh("w1", "ln -s /root/planted-target /etc/rancher/k3s/registries.yaml")
    try:
        result = cargoship("engine-config-sync", "-i", str(fleet.inventory), "--confirm")
        assert result.returncode == 1, result.stdout + result.stderr
        assert (
            "refusing to manage /etc/rancher/k3s/registries.yaml: it is a symbolic link"
            in result.stdout + result.stderr
        )
        assert fleet.sh("w1", "test -e /root/planted-target", check=False).returncode == 1, (
            "written through the symlink"
        )
        assert fleet.starts("w1") == 1 and not fleet.core.read_node("w1").spec.unschedulable
    finally:
        fleet.sh("w1", "rm -f /etc/rancher/k3s/registries.yaml")


def test_a_full_disk_fails_before_the_node_is_touched_and_a_rerun_completes(fleet):
    with disk_full(fleet, "w1", "/etc/rancher/k3s"):
        before = engine_files(fleet, "w1")
        result = cargoship("engine-config-sync", "-i", str(fleet.inventory), "--confirm")
        output = result.stdout + result.stderr
        assert result.returncode == 1, output
        assert (
            "could not prepare the new /etc/rancher/k3s/registries.yaml: [Errno 28] No space left on device" in output
        )
        assert (
            "Nothing was changed: the current files, the engine and the node are as they were. The rollout stopped"
            in output
        )
        assert engine_files(fleet, "w1") == before, "a file the engine reads changed"
        assert fleet.sh("w1", "find /etc/rancher -name '.cargoship-*'").stdout == "", "a staged file was left"
        assert fleet.starts("w1") == 1, "the engine was restarted"
        assert not fleet.core.read_node("w1").spec.unschedulable
        assert fleet.starts("c1") == 2 and fleet.starts("w2") == 1, "the rollout did not stop at w1"
        assert fleet.sh("w1", "ls /var/lib/cargoship/lock*", check=False).returncode != 0, "w1's lock was kept"
    rerun = cargoship("engine-config-sync", "-i", str(fleet.inventory), "--confirm")
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert fleet.loaded("w1")["registry_mirrors"] == ["docker.io"] and fleet.starts("w1") == 2


def test_ssh_cut_in_the_middle_of_a_restart_stops_the_run_and_a_rerun_completes(fleet):
    veth = fleet.hosts["w1"].veth
    fleet.sh("w1", "echo 6 > /etc/cargoship-lab/start-delay")
    # Keepalives of 2 s x 3 instead of 15 s x 3: the cut is noticed in about 6 s (the user's setting wins).
    keepalive = {"ANSIBLE_SSH_ARGS": "-o ControlMaster=auto -o ControlPersist=60s -o ServerAliveInterval=2"}
    run = start_cargoship("engine-config-sync", "-i", str(fleet.inventory), "--confirm", env=keepalive)
    try:
        wait_for(
            lambda: fleet.sh("w1", "systemctl is-active k3s-agent", check=False).stdout.strip() == "activating",
            "w1's engine to be starting",
            timeout=120,
        )
        subprocess.run(["ip", "link", "set", veth, "down"], check=True)
        code = run.wait(timeout=300)
        stderr = run.stderr.read()
    finally:
        subprocess.run(["ip", "link", "set", veth, "up"], check=True)
    assert code in (1, 3), stderr
    # The command says how far the node got and how to finish it.
    assert "w1 was lost in the middle of its sync, during the engine start. Done before: cordoned and drained" in stderr
    assert "engine stopped; new files in place" in stderr
    assert "ansible-playbook -i " in stderr and "cargoship.engine.recover -e cargoship_run_id=" in stderr
    assert fleet.starts("w2") == 1, "the rollout went on past the node that was cut off"
    # Nothing half-written on w1: no temporary file, and every engine file is whole.
    assert fleet.sh("w1", "find /etc/rancher -name '.cargoship-*'").stdout == ""
    assert yaml.safe_load(fleet.sh("w1", "cat /etc/rancher/k3s/registries.yaml").stdout)["mirrors"]
    fleet.sh("w1", "rm -f /etc/cargoship-lab/start-delay")
    fleet.wait_node("w1", "True", timeout=60)
    # The cut-off node's lock goes stale (10 s here): nothing touches it since the cut.
    wait_for(lambda: (fleet.lock_age("w1") or 0) > 10, "w1's lock to go stale", timeout=30)
    rerun = cargoship("engine-config-sync", "-i", str(fleet.inventory), "--confirm")
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert not fleet.core.read_node("w1").spec.unschedulable, "the node the cut-off run cordoned was not given back"
    assert fleet.loaded("w1")["registry_mirrors"] == ["docker.io"]
    again = cargoship("engine-config-sync", "-i", str(fleet.inventory), "--dry-run", "--detailed-exitcode")
    assert again.returncode == 0, again.stdout + again.stderr


def test_a_node_a_lost_run_left_stopped_and_cordoned_is_finished_by_the_next_run(fleet, tmp_path):
    inventory = str(fleet.inventory)
    assert cargoship("engine-config-sync", "-i", inventory, "--limit", "w1", "--confirm").returncode == 0
    # What a run that lost w1 between putting the files in place and starting the engine leaves.
    fleet.kubectl("cordon", "w1")
    fleet.kubectl("annotate", "node", "w1", "cargoship.io/cordoned-by=20261130T000000Z-0ld0ne")
    # A stopped kubelet posts nothing: the node still shows Ready for the grace period.
    fleet.sh("w1", "systemctl stop k3s-agent")
    dry = cargoship(
        "engine-config-sync", "-i", inventory, "--limit", "w1", "--dry-run", "--report-json", str(tmp_path / "dry.json")
    )
    worker = next(p for p in json.loads((tmp_path / "dry.json").read_text())["phases"] if p["name"] == "sync_worker")
    down = "drain and restart k3s-agent (its engine is inactive (dead): a node whose engine is not running is always drained)"
    assert down in worker["hosts"]["w1"]["changes"], dry.stdout
    result = cargoship("engine-config-sync", "-i", inventory, "--limit", "w1", "--confirm")
    assert result.returncode == 0, result.stdout + result.stderr
    assert fleet.sh("w1", "systemctl is-active k3s-agent").stdout.strip() == "active"
    assert fleet.node_ready("w1") == "True"
    node = fleet.core.read_node("w1")
    assert not node.spec.unschedulable and "cargoship.io/cordoned-by" not in (node.metadata.annotations or {})
    assert fleet.loaded("w1")["registry_mirrors"] == ["docker.io"]
