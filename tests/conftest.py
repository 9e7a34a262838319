"""Shared fixtures. Tests that need real hosts ask for ``lab`` (3 k3s hosts) or ``lab_manager``."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "lab"))
# Each parallel worker (pytest-xdist's gw0, gw1, ...) has a lab slot of its own: its own names, subnet,
# API double and state directory (tests/lab/labctl.py), so that labs never meet.
_worker = os.environ.get("PYTEST_XDIST_WORKER", "")
# Outside xdist, the slot given in the environment (0 if none), so that a module can run beside a lab.
if _worker.startswith("gw") and _worker[2:].isdigit():
    os.environ["CARGOSHIP_LAB_SLOT"] = _worker[2:]
else:
    os.environ.setdefault("CARGOSHIP_LAB_SLOT", "0")
# The venv's ansible, ansible-playbook and cargoship, and the checkout's ansible.cfg (which finds the
# collection), whichever way pytest was started.
os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
os.environ.setdefault("ANSIBLE_CONFIG", str(REPO / "ansible.cfg"))
# The logs the tests' failed runs keep (many fail on purpose) go beside the suite's figures, not into the
# user's own ~/.local/state/cargoship/logs.
os.environ["XDG_STATE_HOME"] = str(REPO / ".cache" / "test-state")

from labhosts import LabManager  # noqa: E402

sys.path.insert(0, str(REPO / "tests" / "tools"))
import suite_ledger  # noqa: E402
from suite_order import make_scheduler, module_figures, module_order  # noqa: E402

# With a ledger (make test), cargoship and ansible-playbook are counted per test on their way in.
_wrappers = suite_ledger.install_wrappers(Path(sys.executable).parent)
if _wrappers is not None:
    os.environ["PATH"] = f"{_wrappers}{os.pathsep}{os.environ['PATH']}"


LEDGER_OUTCOMES = pytest.StashKey[list]()


def pytest_collection_modifyitems(session, config, items):
    """With parallel workers (-n), the modules in ``module_order`` (xdist's --dist loadfile hands out whole
    modules in this order). The tests of a module keep their order."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):  # the workers collect, the controller does not
        return
    key = module_order(module_figures())
    position = {}
    for index, item in enumerate(items):
        position.setdefault(item.nodeid.split("::", 1)[0], index)
    items.sort(key=lambda item: (key(item.nodeid.split("::", 1)[0]), position[item.nodeid.split("::", 1)[0]]))


@pytest.hookimpl(optionalhook=True)  # a hook of xdist's: `make compat` runs without xdist
def pytest_xdist_make_scheduler(config, log):
    return make_scheduler(config, log)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Each test's wall time (set-up and tear-down included), runs, restarts and lab builds, to the ledger."""
    suite_ledger.LEDGER_STATE.start(item)
    yield
    outcomes = item.stash.get(LEDGER_OUTCOMES, [])
    outcome = "failed" if "failed" in outcomes else "skipped" if "skipped" in outcomes else "passed"
    suite_ledger.LEDGER_STATE.finish(item, outcome)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    made = yield
    item.stash.setdefault(LEDGER_OUTCOMES, []).append(made.get_result().outcome)


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
    suite_ledger.LEDGER_STATE.manager = manager
    try:
        yield manager
    finally:
        manager.teardown()
        signal.signal(signal.SIGTERM, previous)


@pytest.fixture
def lab(lab_manager):
    """Three k3s hosts: one controller (c1), two workers (w1, w2), all Ready."""
    return lab_manager.get(hosts=3, controllers=1, engine="k3s")
