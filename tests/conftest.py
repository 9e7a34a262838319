"""Shared fixtures. Tests that need real hosts ask for ``lab`` (3 k3s hosts) or ``lab_manager``."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "lab"))
# The venv's ansible, ansible-playbook and cargoship, and the checkout's ansible.cfg (which finds the
# collection), whichever way pytest was started.
os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
os.environ.setdefault("ANSIBLE_CONFIG", str(REPO / "ansible.cfg"))

from labhosts import LabManager  # noqa: E402


def _stop_on_sigterm(signum, frame):
    # pytest runs finalizers on KeyboardInterrupt, not on SIGTERM: turn one into the other so that
    # a CI time-out or `kill` still tears the lab down.
    raise KeyboardInterrupt(f"signal {signum}")


@pytest.fixture(scope="session")
def lab_manager():
    if os.geteuid() != 0:
        pytest.fail("the lab tests need root (network namespaces, podman); run them through `make test`")
    previous = signal.signal(signal.SIGTERM, _stop_on_sigterm)
    manager = LabManager()
    try:
        yield manager
    finally:
        manager.teardown()
        signal.signal(signal.SIGTERM, previous)


@pytest.fixture
def lab(lab_manager):
    """Three k3s hosts: one controller (c1), two workers (w1, w2), all Ready."""
    return lab_manager.get(hosts=3, controllers=1, engine="k3s")
