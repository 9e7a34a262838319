"""The exclusive host lock: a live run never loses it, a dead run's lock goes stale on its own."""

from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import labctl
import pytest
import yaml
from helpers import budget_refusing_every_eviction, cargoship, lock_keepers, start_cargoship, wait_for

pytestmark = pytest.mark.lab

REPO = Path(__file__).resolve().parents[2]
STALE_AFTER = 6


@pytest.fixture
def fleet(lab_manager):
    """A fresh controller and worker whose config drifted, with a short stale window, and a
    PodDisruptionBudget that holds the first drain until the test deletes it."""
    lab = lab_manager.get(hosts=2, controllers=1, engine="k3s", fresh=True)
    desired = yaml.safe_load((REPO / "examples" / "group_vars" / "all.yml").read_text())
    desired.update(cargoship_lock_stale_after=STALE_AFTER, cargoship_lock_touch_interval=2, cargoship_drain_timeout=90)
    (lab.state / "group_vars").mkdir(exist_ok=True)
    (lab.state / "group_vars" / "all.yml").write_text(yaml.safe_dump(desired))
    with budget_refusing_every_eviction(lab, "hold", holding=("c1",)):
        yield lab


def keepers() -> list[str]:
    return lock_keepers()


def test_a_live_run_keeps_its_lock_through_a_drain_longer_than_the_stale_window(fleet):
    first = start_cargoship("engine-config-sync", "-i", str(fleet.inventory), "--confirm")
    try:
        wait_for(lambda: fleet.core.read_node("c1").spec.unschedulable, "the first run to start draining c1")
        # Watched all along a drain twice as long as the stale window: no lock ever gets that old.
        watch_until = time.monotonic() + STALE_AFTER * 2
        while time.monotonic() < watch_until:
            for host in fleet.hosts:
                assert fleet.lock_age(host) < STALE_AFTER, f"lock on {host} went stale under a live run"
        second = cargoship("engine-config-sync", "-i", str(fleet.inventory), "--confirm")
        assert second.returncode == 4, second.stdout + second.stderr
        assert "locked by run" in second.stderr
    finally:
        fleet.policy.delete_namespaced_pod_disruption_budget("hold", "default")
    output, _stderr = first.communicate(timeout=300)
    assert first.returncode == 0, output
    for host in fleet.hosts:
        assert fleet.lock_age(host) is None, f"lock left on {host}"
    wait_for(lambda: not keepers(), "the keeper to exit with its run", timeout=10)


def leftovers_in(scratch: Path) -> list[str]:
    return sorted(path.name.rsplit("-", 1)[0] for path in scratch.iterdir() if path.name.startswith("cargoship-"))


def test_a_killed_run_leaves_a_lock_that_goes_stale_and_the_next_run_takes_over(fleet):
    # A temporary directory of the runs' own, short enough for SSH socket paths: what the killed run left
    # there, and what the next run removed, is seen apart from other tests' runs.
    scratch = Path(tempfile.mkdtemp(prefix="cs-tmp-"))
    try:
        killed_then_rerun(fleet, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def killed_then_rerun(fleet, scratch: Path) -> None:
    env = {"TMPDIR": str(scratch)}
    first = start_cargoship("engine-config-sync", "-i", str(fleet.inventory), "--confirm", env=env)
    wait_for(lambda: fleet.core.read_node("c1").spec.unschedulable, "the first run to start draining c1")
    assert keepers(), "no keeper while a run holds its locks"
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=10)
    # The run does not go on unsupervised, and nothing keeps touching the locks.
    wait_for(lambda: not keepers(), "the keeper to end with the killed command", timeout=20)
    playbooks = subprocess.run(
        ["pgrep", "-f", f"ansible-playbook -i {fleet.inventory}"], capture_output=True, text=True, check=False
    )
    assert playbooks.stdout.split() == [], "ansible-playbook outlived the killed cargoship command"
    age = fleet.lock_age("c1")
    assert age is not None, "the killed run's lock should still be there, going stale"
    # Two touch intervals (2 s) go by without a touch: the age only grows.

    def aged_untouched() -> bool:
        now = fleet.lock_age("c1")
        assert now is not None and now >= age, "something still touches the dead run's lock"
        return now >= age + 4

    wait_for(aged_untouched, "the dead run's lock to age two touch intervals", timeout=10)

    fleet.policy.delete_namespaced_pod_disruption_budget("hold", "default")
    wait_for(lambda: fleet.lock_age("c1") > STALE_AFTER, "the lock to go stale", timeout=30)
    # The killed command's run directory (its events) and SSH connection directory stayed behind (the
    # keeper, which ended with it, removed its own spool).
    assert leftovers_in(scratch) == ["cargoship-run", "cargoship-ssh"], list(scratch.iterdir())
    second = cargoship("engine-config-sync", "-i", str(fleet.inventory), "--confirm", env=env)
    assert second.returncode == 0, second.stdout + second.stderr
    assert not {"cargoship-run", "cargoship-ssh"} & set(leftovers_in(scratch)), "the killed run's directories stayed"
    # The second run's own keeper removes its spool as it ends, within a second of the run.
    wait_for(lambda: leftovers_in(scratch) == [], "the second run's keeper to remove its spool", timeout=10)
    for host in fleet.hosts:
        assert fleet.lock_age(host) is None
        assert not fleet.core.read_node(host).spec.unschedulable, f"{host} left cordoned"
        assert fleet.loaded(host)["registry_mirrors"] == ["docker.io"]


def sudo_without_password(lab, host: str, allowed: bool) -> None:
    """Whether the lab's user may sudo without a password on a host (set as root through podman, since
    sudo is the thing taken away)."""
    rule = "NOPASSWD:ALL" if allowed else "ALL"
    labctl.podman(
        "exec",
        lab.hosts[host].container,
        "sh",
        "-c",
        f"echo '{labctl.SSH_USER} ALL=(ALL) {rule}' > /etc/sudoers.d/{labctl.SSH_USER}",
    )


def test_a_lock_the_keeper_cannot_touch_stops_the_run_instead_of_going_stale(fleet):
    run = start_cargoship("engine-config-sync", "-i", str(fleet.inventory), "--confirm")
    try:
        wait_for(lambda: fleet.core.read_node("c1").spec.unschedulable, "the run to start draining c1")
        # The keeper's touch of w1's lock now meets a sudo that asks for a password.
        sudo_without_password(fleet, "w1", allowed=False)
        output, errors = run.communicate(timeout=120)
    finally:
        sudo_without_password(fleet, "w1", allowed=True)
        if run.poll() is None:
            run.kill()
        fleet.sh("w1", "rm -f /var/lib/cargoship/lock.json")
    assert run.returncode == 130, output + errors
    assert "the lock on w1 could not be kept fresh (sudo: a password is required)" in errors
    # Stopped like Ctrl-C: c1, which it had started on, is given back without a restart.
    assert not fleet.core.read_node("c1").spec.unschedulable
    assert fleet.lock_age("c1") is None


def test_a_lock_taken_over_under_the_run_or_a_dead_keeper_stops_it_as_ctrl_c_would(fleet):
    """The keeper finds w1's lock held by another run (as a taker with a short window of its own would
    leave it), then, in a second run, the keeper itself is killed: both runs stop instead of going on
    without their locks, and give c1 back."""
    taken = '{"run_id": "someone-else", "holder": {"user": "other"}, "stale_after": 60, "touch_interval": 30}'
    for stop in ("taken", "keeper killed"):
        run = start_cargoship("engine-config-sync", "-i", str(fleet.inventory), "--confirm")
        try:
            wait_for(lambda: fleet.core.read_node("c1").spec.unschedulable, "the run to start draining c1")
            if stop == "taken":
                fleet.sh("w1", f"echo '{taken}' > /var/lib/cargoship/lock.json")
            else:
                wait_for(lambda: keepers() != [], "the run's keeper")
                for pid in keepers():
                    subprocess.run(["kill", "-9", pid], check=False)
            output, errors = run.communicate(timeout=120)
        finally:
            if run.poll() is None:
                run.kill()
            fleet.sh("w1", "rm -f /var/lib/cargoship/lock.json")
        assert run.returncode == 130, output + errors
        expected = {
            "taken": "the lock on w1 was taken over by another run; the run was stopped",
            "keeper killed": "the lock keeper of this run (pid ",
        }[stop]
        assert expected in " ".join(errors.split()), errors
        assert not fleet.core.read_node("c1").spec.unschedulable, stop
        assert fleet.lock_age("c1") is None, stop
