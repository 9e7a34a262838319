"""Phases one at a time, and user hooks around them."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml
from helpers import cargoship

pytestmark = pytest.mark.lab

REPO = Path(__file__).resolve().parents[2]
# What each phase reports when it is asked for alone in a dry run (the inventory of `inventory()` has work
# for every phase that changes something).
ALONE_IN_A_DRY_RUN = {
    "connect": "ran",
    "detect_os": "ran",
    "lock": "would run",
    "host_facts": "ran",
    "validate_hosts": "ran",
    "engine_facts": "ran",
    "sync_controller": "would run",
    "sync_worker": "would run",
    "kubeconfig": "would run",
    "label_nodes": "would run",
    "unlock": "unassessed",
    "disconnect": "nothing to do",
}
RECORD = 'echo "{point} $(hostname) $(date +%s.%N)" | sudo tee -a /root/hooks.log >/dev/null'
# Whether this node's lock file exists when the hook runs: shows where a hook ran relative to its phase.
LOCK_STATE = (
    "sudo sh -c 'test -e /var/lib/cargoship/lock.json && echo held || echo free' | sudo tee -a /root/lock-state.log"
)


def report(path: Path) -> dict:
    return json.loads(path.read_text())


def statuses(data: dict) -> dict:
    return {p["name"]: p["status"] for p in data["phases"]}


@pytest.fixture(scope="module")
def fleet(lab_manager):
    return lab_manager.get(hosts=3, controllers=1, engine="k3s", fresh=True)


def inventory(lab, directory: Path, **extra) -> Path:
    (directory / "group_vars").mkdir(parents=True, exist_ok=True)
    hosts = yaml.safe_load(lab.inventory.read_text())
    hosts["all"]["vars"]["cargoship_kubeconfig_path"] = str(directory / "kubeconfig")
    (directory / "hosts.yml").write_text(yaml.safe_dump(hosts))
    state = yaml.safe_load((REPO / "examples" / "group_vars" / "all.yml").read_text())
    state.update(extra)
    (directory / "group_vars" / "all.yml").write_text(yaml.safe_dump(state))
    (directory / "group_vars" / "workers.yml").write_text("cargoship_profile: infrastructure\n")
    return directory


def hook_log(lab) -> list[tuple[str, str]]:
    lines = []
    for name in lab.hosts:
        out = lab.sh(name, "cat /root/hooks.log 2>/dev/null", check=False).stdout
        lines += [line.split() for line in out.splitlines()]
    return [(point, host) for point, host, _when in sorted(lines, key=lambda parts: float(parts[2]))]


def clear_hook_log(lab) -> None:
    for name in lab.hosts:
        lab.sh(name, "rm -f /root/hooks.log /root/lock-state.log")


@pytest.mark.parametrize("name", list(ALONE_IN_A_DRY_RUN))
def test_every_phase_runs_alone_in_a_dry_run_with_what_it_needs(fleet, tmp_path, name):
    inv = inventory(fleet, tmp_path / "inv")
    result = cargoship("phase", "run", name, "-i", str(inv), "--dry-run", "--report-json", str(tmp_path / "r.json"))
    assert result.returncode == 0, result.stdout + result.stderr
    data = report(tmp_path / "r.json")
    assert data["selected_phase"] == name
    ran = {phase for phase, status in statuses(data).items() if status != "skipped"}
    assert statuses(data)[name] == ALONE_IN_A_DRY_RUN[name]
    assert "connect" in ran
    if name in ("sync_controller", "sync_worker"):
        assert {"host_facts", "validate_hosts", "engine_facts", "lock", "unlock"} <= ran
        assert statuses(data)[name] == "would run"
        other = "sync_worker" if name == "sync_controller" else "sync_controller"
        assert statuses(data)[other] == "skipped"
    if name == "detect_os":
        assert ran == {"connect", "detect_os", "disconnect"}, "a read-only phase takes no lock"


def test_a_sync_phase_alone_is_idempotent_and_force_redoes_it(fleet, tmp_path):
    inv = inventory(fleet, tmp_path / "inv")
    starts = {name: fleet.starts(name) for name in fleet.hosts}
    first = cargoship("phase", "run", "sync_worker", "-i", str(inv), "--confirm")
    assert first.returncode == 0, first.stdout + first.stderr
    assert {n: fleet.starts(n) - starts[n] for n in fleet.hosts} == {"c1": 0, "w1": 1, "w2": 1}
    again = cargoship(
        "phase", "run", "sync_worker", "-i", str(inv), "--confirm", "--report-json", str(tmp_path / "a.json")
    )
    assert again.returncode == 0 and statuses(report(tmp_path / "a.json"))["sync_worker"] == "nothing to do"
    assert {n: fleet.starts(n) - starts[n] for n in fleet.hosts} == {"c1": 0, "w1": 1, "w2": 1}
    forced = cargoship("phase", "run", "sync_worker", "-i", str(inv), "--confirm", "--force")
    assert forced.returncode == 0, forced.stderr
    assert {n: fleet.starts(n) - starts[n] for n in fleet.hosts} == {"c1": 0, "w1": 2, "w2": 2}
    for name in fleet.hosts:
        assert fleet.sh(name, "test -e /var/lib/cargoship/lock.json", check=False).returncode == 1


def test_plain_ansible_playbook_runs_one_phase_with_the_same_report(fleet, tmp_path):
    inv = inventory(fleet, tmp_path / "inv")
    cli = cargoship(
        "phase", "run", "sync_controller", "-i", str(inv), "--dry-run", "--report-json", str(tmp_path / "cli.json")
    )
    assert cli.returncode == 0, cli.stderr
    plain = subprocess.run(
        [
            "ansible-playbook",
            "-i",
            str(inv),
            "cargoship.engine.engine_config_sync",
            "--check",
            "-e",
            "cargoship_phase=sync_controller",
            "-e",
            "cargoship_work_concurrency=1",
            "-e",
            "cargoship_kubeconfig_update=false",
            "-e",
            "cargoship_label_nodes=false",
            "-e",
            "cargoship_force=false",
            "-e",
            "cargoship_kubeconfig_keep=false",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, "CARGOSHIP_REPORT_JSON": str(tmp_path / "plain.json")},
    )
    assert plain.returncode == 0, plain.stdout[-3000:]
    plain, by_command = report(tmp_path / "plain.json"), report(tmp_path / "cli.json")
    assert plain.pop("run_id") and by_command.pop("run_id")  # each run has its own
    assert plain == by_command


def test_kubeconfig_and_label_phases_alone_and_the_keep_flag(fleet, tmp_path):
    inv = inventory(fleet, tmp_path / "inv", cargoship_cluster_name="lab")
    local = inv / "kubeconfig"
    local.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "lab", "cluster": {"server": "https://keep.me:6443"}}],
                "users": [],
                "contexts": [],
            }
        )
    )
    kept = cargoship("phase", "run", "kubeconfig", "-i", str(inv), "--confirm", "--keep-existing")
    assert kept.returncode == 0, kept.stdout + kept.stderr
    assert "https://keep.me:6443" in local.read_text()
    replaced = cargoship("phase", "run", "kubeconfig", "-i", str(inv), "--confirm")
    assert replaced.returncode == 0, replaced.stderr
    assert "https://keep.me:6443" not in local.read_text()
    assert f"https://{fleet.hosts['c1'].address}:6443" in local.read_text()
    labeled = cargoship("phase", "run", "label_nodes", "-i", str(inv), "--confirm")
    assert labeled.returncode == 0, labeled.stderr
    assert fleet.core.read_node("w2").metadata.labels.get("node-role.kubernetes.io/infrastructure") == "true"


def test_lock_alone_holds_the_hosts_until_unlock_breaks_it(fleet, tmp_path):
    inv = inventory(fleet, tmp_path / "inv")
    assert cargoship("phase", "run", "lock", "-i", str(inv), "--confirm").returncode == 0
    blocked = cargoship("phase", "run", "sync_worker", "-i", str(inv), "--confirm")
    assert blocked.returncode == 4, blocked.stdout + blocked.stderr
    assert cargoship("phase", "run", "unlock", "-i", str(inv), "--confirm", "--force").returncode == 0
    for name in fleet.hosts:
        assert fleet.sh(name, "test -e /var/lib/cargoship/lock.json", check=False).returncode == 1


def hooks_everywhere(lab) -> dict:
    points = [
        "detect_os.before.worker",
        "detect_os.after.controller",
        "sync_controller.before.controller",
        "sync_controller.after.controller",
        "sync_worker.before.worker",
        "sync_worker.after.worker",
    ]
    hooks = {point: [{"name": "record", "command": RECORD.format(point=point)}] for point in points}
    for point in ("lock.before.worker", "lock.after.worker"):
        hooks[point] = [{"name": "lock state", "command": LOCK_STATE}]
    not_ready = f"kubectl --kubeconfig {lab.kubeconfig} get nodes --no-headers | grep -vc ' Ready ' > /root/cluster_ready.notready; true"
    hooks["cluster_ready"] = [
        {"name": "record", "command": RECORD.format(point="cluster_ready")},
        {"name": "count NotReady nodes", "command": not_ready, "run_on": "control"},
    ]
    return hooks


def test_hooks_fire_in_order_on_the_right_nodes_and_not_in_a_dry_run(fleet, tmp_path):
    clear_hook_log(fleet)
    Path("/root/cluster_ready.notready").unlink(missing_ok=True)
    inv = inventory(
        fleet,
        tmp_path / "inv",
        cargoship_hooks=hooks_everywhere(fleet),
        cargoship_registries={"mirrors": {"quay.io": {"endpoint": ["https://quay-mirror.example"]}}},
    )
    dry = cargoship("engine-config-sync", "-i", str(inv), "--dry-run", "--report-json", str(tmp_path / "d.json"))
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert hook_log(fleet) == [], "a dry run ran a hook"
    listed = report(tmp_path / "d.json")
    assert "would run hook sync_worker.before.worker: record" in listed["phases"][7]["hosts"]["w1"]["changes"]
    assert listed["stages"][0]["name"] == "cluster_ready" and listed["stages"][0]["status"] == "would run"

    real = cargoship("engine-config-sync", "-i", str(inv), "--confirm")
    assert real.returncode == 0, real.stdout + real.stderr
    fired = hook_log(fleet)
    # Each phase's before-hooks on every node (in parallel: any order among nodes), then its after-hooks;
    # the sync hooks around each node's restart, node by node; cluster_ready last.
    assert sorted(fired[:2]) == [("detect_os.before.worker", "w1"), ("detect_os.before.worker", "w2")]
    assert fired[2:] == [
        ("detect_os.after.controller", "c1"),
        ("sync_controller.before.controller", "c1"),
        ("sync_controller.after.controller", "c1"),
        ("sync_worker.before.worker", "w1"),
        ("sync_worker.after.worker", "w1"),
        ("sync_worker.before.worker", "w2"),
        ("sync_worker.after.worker", "w2"),
        ("cluster_ready", "c1"),
    ]
    assert [p for p, _h in hook_log(fleet)].count("cluster_ready") == 1
    for worker in fleet.workers:
        assert fleet.sh(worker, "cat /root/lock-state.log").stdout.split() == ["free", "held"], (
            "hooks ran on the wrong side of the lock phase"
        )
    assert fleet.sh("c1", "test -e /root/lock-state.log", check=False).returncode == 1, (
        "worker hooks ran on a controller"
    )
    assert Path("/root/cluster_ready.notready").read_text().strip() == "0", (
        "cluster_ready fired before every node was Ready"
    )
    # Nothing to restart on a second run: the hooks around restarts do not fire, cluster_ready still does once.
    clear_hook_log(fleet)
    assert cargoship("engine-config-sync", "-i", str(inv), "--confirm").returncode == 0
    assert [p for p, _h in hook_log(fleet)] == [
        "detect_os.before.worker",
        "detect_os.before.worker",
        "detect_os.after.controller",
        "cluster_ready",
    ]


def test_a_failing_hook_stops_the_rollout_and_leaves_the_node_as_it_was(fleet, tmp_path):
    failing = {"sync_worker.before.worker": [{"name": "refuse", "command": "test $(hostname) != w1"}]}
    inv = inventory(
        fleet,
        tmp_path / "inv",
        cargoship_hooks=failing,
        cargoship_registries={"mirrors": {"ghcr.io": {"endpoint": ["https://ghcr-mirror.example"]}}},
    )
    starts = {name: fleet.starts(name) for name in fleet.hosts}
    before = {
        name: fleet.sh(name, "sha256sum /etc/rancher/k3s/registries.yaml", check=False).stdout for name in ("w1", "w2")
    }
    result = cargoship("engine-config-sync", "-i", str(inv), "--confirm")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "refuse" in result.stdout + result.stderr
    assert fleet.starts("w1") == starts["w1"] and fleet.starts("w2") == starts["w2"], (
        "a worker restarted after the hook failed"
    )
    assert {
        name: fleet.sh(name, "sha256sum /etc/rancher/k3s/registries.yaml", check=False).stdout for name in ("w1", "w2")
    } == before
    assert not fleet.core.read_node("w1").spec.unschedulable
    for name in fleet.hosts:
        assert fleet.sh(name, "test -e /var/lib/cargoship/lock.json", check=False).returncode == 1
    # Allowed to fail: the rollout goes on.
    failing["sync_worker.before.worker"][0]["may_fail"] = True
    inv = inventory(
        fleet,
        tmp_path / "inv2",
        cargoship_hooks=failing,
        cargoship_registries={"mirrors": {"ghcr.io": {"endpoint": ["https://ghcr-mirror.example"]}}},
    )
    assert cargoship("engine-config-sync", "-i", str(inv), "--confirm").returncode == 0
    assert fleet.starts("w1") == starts["w1"] + 1 and fleet.starts("w2") == starts["w2"] + 1
