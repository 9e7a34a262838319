"""Ctrl-C: the run stops, the nodes it had started on are put back as they were, its locks are released."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.lab

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def fleet(lab_manager):
    lab = lab_manager.get(hosts=2, controllers=1, engine="k3s", fresh=True)
    (lab.state / "group_vars").mkdir(exist_ok=True)
    (lab.state / "group_vars" / "all.yml").write_text((REPO / "examples" / "group_vars" / "all.yml").read_text())
    return lab


def wait_for(condition, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)


def engine_files(lab, name: str) -> str:
    """The files the engine reads at start. Chart values are left out: they are written in place,
    whole, before any node is drained, and are a finished change rather than a half-done one."""
    return lab.sh(
        name,
        "cd / && find etc/rancher var/lib/rancher/k3s/server -type f -not -path '*/lab/*' "
        "-not -path '*/manifests/*' -not -name k3s.yaml -exec sha256sum {} + | sort",
    ).stdout


def interrupt_when(lab, condition, what: str) -> tuple[int, str]:
    run = subprocess.Popen(
        ["cargoship", "engine-config-sync", "-i", str(lab.inventory), "--confirm"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_for(condition, what)
    except AssertionError:
        run.kill()
        raise
    run.send_signal(signal.SIGINT)
    output, _stderr = run.communicate(timeout=300)
    return run.returncode, output


def assert_as_before(lab, before: dict) -> None:
    charts = lab.sh(
        "c1", "cat /var/lib/rancher/k3s/server/manifests/cargoship-traefik.yaml 2>/dev/null", check=False
    ).stdout
    assert charts == "" or charts.rstrip().endswith("}"), "a chart manifest was left half-written"
    for name in lab.hosts:
        assert engine_files(lab, name) == before[name], f"{name}: files not as before"
        assert lab.sh(name, f"systemctl is-active {lab.service(name)}").stdout.strip() == "active"
        assert lab.node_ready(name) == "True"
        assert not lab.core.read_node(name).spec.unschedulable, f"{name} left cordoned"
        assert lab.sh(name, "test -e /var/lib/cargoship/lock.json", check=False).returncode == 1, f"lock left on {name}"
    keepers = subprocess.run(["pgrep", "-f", "_lock_keeper.py"], capture_output=True, text=True, check=False)
    assert keepers.stdout.split() == []


def test_ctrl_c_during_drain_uncordons_and_releases(fleet):
    before = {name: engine_files(fleet, name) for name in fleet.hosts}
    fleet.policy.create_namespaced_pod_disruption_budget(
        "default",
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "hold"},
            "spec": {"minAvailable": "100%", "selector": {"matchLabels": {"app": "web"}}},
        },
    )
    try:
        code, output = interrupt_when(fleet, lambda: fleet.core.read_node("c1").spec.unschedulable, "c1 to be draining")
    finally:
        fleet.policy.delete_namespaced_pod_disruption_budget("hold", "default")
    assert code == 130, output
    assert "interrupted while working on c1" in output
    assert (
        "c1: Previous configuration unchanged (nothing had been written); engine running and node Ready; node uncordoned."
        in output
    )
    assert_as_before(fleet, before)


def test_ctrl_c_during_restart_restores_the_previous_config(fleet):
    before = {name: engine_files(fleet, name) for name in fleet.hosts}
    loaded_before = fleet.loaded("c1")["files"]
    fleet.sh("c1", "echo 8 > /etc/cargoship-lab/start-delay")
    try:
        code, output = interrupt_when(
            fleet,
            lambda: fleet.sh("c1", "systemctl is-active k3s", check=False).stdout.strip() == "activating",
            "c1's engine to be starting on its new config",
        )
    finally:
        fleet.sh("c1", "rm -f /etc/cargoship-lab/start-delay")
    assert code == 130, output
    assert "c1: Previous configuration restored; engine running and node Ready; node uncordoned." in output
    assert_as_before(fleet, before)
    # The engine runs on the previous files again, not on the ones written before the interrupt.
    assert fleet.loaded("c1")["files"] == loaded_before
