"""Ctrl-C: the run stops, the nodes it had started on are put back as they were, its locks are released."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest
import yaml
from helpers import budget_refusing_every_eviction, engine_files, lock_keepers, wait_for

pytestmark = pytest.mark.lab

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def fleet(lab_manager):
    lab = lab_manager.get(hosts=2, controllers=1, engine="k3s", fresh=True)
    (lab.state / "group_vars").mkdir(exist_ok=True)
    (lab.state / "group_vars" / "all.yml").write_text((REPO / "examples" / "group_vars" / "all.yml").read_text())
    return lab


def interrupt_when(lab, condition, what: str, sig: int = signal.SIGINT) -> tuple[int, str]:
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
    run.send_signal(sig)
    output, _stderr = run.communicate(timeout=300)
    return run.returncode, output


def assert_as_before(lab, before: dict) -> None:
    charts = lab.sh(
        "c1", "cat /var/lib/rancher/k3s/server/manifests/cargoship-traefik.yaml 2>/dev/null", check=False
    ).stdout
    whole = charts == "" or (yaml.safe_load(charts) or {}).get("spec", {}).get("valuesContent") is not None
    assert whole, "a chart manifest was left half-written"
    for name in lab.hosts:
        assert engine_files(lab, name) == before[name], f"{name}: files not as before"
        assert lab.sh(name, f"systemctl is-active {lab.service(name)}").stdout.strip() == "active"
        assert lab.node_ready(name) == "True"
        assert not lab.core.read_node(name).spec.unschedulable, f"{name} left cordoned"
        assert lab.sh(name, "test -e /var/lib/cargoship/lock.json", check=False).returncode == 1, f"lock left on {name}"

    def no_keeper() -> bool:
        return lock_keepers() == []

    # The keeper looks for its run every second and finishes a touch it has begun (an ssh round trip).
    wait_for(no_keeper, "the lock keeper to end with its run", 15)


# SIGTERM and SIGHUP are how CI systems and closed terminals cancel a job: the same as Ctrl-C.
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=["ctrl-c", "sigterm", "sighup"])
def test_ctrl_c_during_drain_uncordons_and_releases(fleet, sig):
    before = {name: engine_files(fleet, name) for name in fleet.hosts}
    with budget_refusing_every_eviction(fleet, holding=("c1",)):
        code, output = interrupt_when(
            fleet, lambda: fleet.core.read_node("c1").spec.unschedulable, "c1 to be draining", sig
        )
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


def test_ctrl_c_while_the_engine_is_stopped_for_the_write_restores_it(fleet):
    before = {name: engine_files(fleet, name) for name in fleet.hosts}
    loaded_before = fleet.loaded("c1")["files"]
    starts_before = fleet.starts("c1")

    def engine_stopping() -> bool:
        # Watched on the host itself, every 50 ms. The stop takes 3 s here (the lab's stop-delay): the
        # interrupt lands while the engine goes down, so the run ends before its write and its start,
        # which would otherwise follow the stop within a second, sooner than an interrupt is sure to land.
        return (
            fleet.sh(
                "c1",
                'for i in $(seq 1200); do [ "$(systemctl is-active k3s)" = deactivating ] && exit 0; sleep 0.05; done; exit 1',
                check=False,
                timeout=90,
            ).returncode
            == 0
        )

    fleet.sh("c1", "echo 3 > /etc/cargoship-lab/stop-delay")
    try:
        code, output = interrupt_when(fleet, engine_stopping, "c1's engine to be stopping for the write")
    finally:
        fleet.sh("c1", "rm -f /etc/cargoship-lab/stop-delay")
    assert code == 130, output
    assert "c1: Previous configuration" in output and "engine running and node Ready" in output
    assert_as_before(fleet, before)
    # The engine was started once since, by the recovery, on the previous files: the interrupt came
    # while it stopped, never letting the engine run on the new files.
    assert fleet.starts("c1") == starts_before + 1
    assert fleet.loaded("c1")["files"] == loaded_before


def test_a_second_ctrl_c_stops_the_recovery_and_says_how_to_finish_it(fleet):
    fleet.sh("c1", "echo 8 > /etc/cargoship-lab/start-delay")
    delayed = "journalctl -u k3s --no-pager -o cat | grep -c 'start-up delayed'"
    before = int(fleet.sh("c1", delayed, check=False).stdout.strip() or 0)
    run = subprocess.Popen(
        ["cargoship", "engine-config-sync", "-i", str(fleet.inventory), "--confirm"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        # The run's start of c1 has begun once the engine logged its delay (the unit is activating a moment
        # before that: counted then, this start would pass below for the recovery's).
        wait_for(
            lambda: int(fleet.sh("c1", delayed, check=False).stdout.strip() or 0) > before,
            "c1's engine to be starting on its new config",
        )
        starts_begun = int(fleet.sh("c1", delayed, check=False).stdout.strip() or 0)
        run.send_signal(signal.SIGINT)
        lines = []
        for line in run.stdout:
            lines.append(line)
            if "putting them back as they were" in line:
                break
        # The recovery is now restarting c1 on its previous files, which takes 8 s: seen once it has begun.
        wait_for(
            lambda: int(fleet.sh("c1", delayed, check=False).stdout.strip() or 0) > starts_begun,
            "the recovery to be starting c1 again",
        )
        run.send_signal(signal.SIGINT)
        output = "".join(lines) + run.communicate(timeout=300)[0]
    finally:
        fleet.sh("c1", "rm -f /etc/cargoship-lab/start-delay")
    assert run.returncode == 130, output
    assert "c1: NOT recovered (stopped by Ctrl-C)" in output
    resume = output[output.index("`ansible-playbook") :].split("`")[1]
    finished = subprocess.run(resume, shell=True, capture_output=True, text=True, timeout=300, check=False)
    assert finished.returncode == 0, finished.stdout[-2000:]
    fleet.wait_node("c1", "True")
    assert not fleet.core.read_node("c1").spec.unschedulable
    assert fleet.sh("c1", "systemctl is-active k3s").stdout.strip() == "active"
