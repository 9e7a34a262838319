"""The chaos soak in short (tests/soak/soak.py; ``make soak`` runs the long one): three rollouts of a fixed seed
on the suite's common lab, each a random change of the desired state struck by a fault at a random moment,
then the documented recovery; every invariant must hold after each."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import labctl
import pytest
from ansible.plugins.connection.ssh import Connection as SshConnection
from helpers import REPO, cargoship

sys.path[:0] = [str(REPO / "tests" / "soak")]

import soak  # noqa: E402

pytestmark = pytest.mark.lab
# The seed draws a Ctrl-C, a SIGKILL and an SSH cut, in that order, each with a registries change every node
# restarts for (``soak.drawn``), each fault at its own moment.
SEED = "short-249"


def test_a_short_soak_of_fixed_seeds_ends_every_rollout_with_the_fleet_whole(lab_manager, tmp_path):
    lab = lab_manager.get(hosts=3, controllers=1, engine="k3s")
    workdirs = Path(tempfile.gettempdir())
    before = set(workdirs.glob("cargoship-soak-*"))
    records = soak.soak(SEED, 3, ["k3s"], 3, 1, tmp_path / "soak.jsonl", lab=lab)
    assert [r["fault"] for r in records] == ["sigint", "sigkill", "ssh_cut"]
    assert all(not r["breach"] for r in records), [r["breach"] for r in records]
    assert all(r["recovery"]["rc"] == 0 for r in records)
    # The runs' inventories hold the example's credentials: a soak that held leaves none of them behind.
    assert set(workdirs.glob("cargoship-soak-*")) == before


def test_a_run_never_sends_its_sessions_down_a_master_connection_an_earlier_run_left(lab_manager):
    """The breach the soak found (seed soak-20261206-b390, rollout 3): after an SSH cut, the recovery's rerun
    reused the master connection the cut run had left in Ansible's shared directory (ControlPersist), whose
    TCP stream was dead, and failed the host ("Timeout waiting for privilege escalation prompt"). Here a
    master that answers nothing stands in for it: a real one, left by a plain Ansible run, then stopped."""
    lab = lab_manager.get(hosts=3, controllers=1, engine="k3s")
    shared = Path.home() / ".ansible" / "cp"
    before = set(shared.glob("*")) if shared.is_dir() else set()
    plain = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_SSH_CONTROL_PATH")}
    ping = subprocess.run(
        ["ansible", "w1", "-i", str(lab.inventory), "-b", "-m", "ansible.builtin.ping"],
        env=plain,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert ping.returncode == 0, ping.stdout + ping.stderr
    # Ansible's own name for w1's master (other tests' plain Ansible runs may leave theirs here meanwhile).
    named = {
        Path(SshConnection._create_control_path(lab.hosts["w1"].address, port, labctl.SSH_USER) % {"directory": shared})
        for port in (None, 22)
    }
    left = sorted(path for path in set(shared.glob("*")) - before if path in named)
    assert len(left) == 1 and left[0].is_socket(), f"Ansible's run left no master connection to w1: {left}"
    masters = [int(pid) for pid in pgrep(str(left[0]))]
    assert masters, f"no process keeps {left[0]}"
    try:
        for pid in masters:
            os.kill(pid, signal.SIGSTOP)
        result = cargoship("unlock", "-i", str(lab.inventory), "--limit", "w1", "--yes", timeout=300)
        assert result.returncode == 0, result.stdout + result.stderr
    finally:
        for pid in masters:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        left[0].unlink(missing_ok=True)


def pgrep(pattern: str) -> list[str]:
    return subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True, check=False).stdout.split()
