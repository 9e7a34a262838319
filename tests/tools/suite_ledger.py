"""Where the test suite's time goes: a ledger of every test (wall time, cargoship runs, node restarts,
lab builds), written when CARGOSHIP_TEST_LEDGER names a file (`make test` does). tests/tools/suite_time.py
turns it into the table of docs/testing.md.

How each figure is taken, without changing what a test does:
- cargoship runs: `cargoship` and `ansible-playbook` are found first in a directory of wrappers that note
  the test asking (pytest's PYTEST_CURRENT_TEST, which its subprocesses inherit) and then exec the real
  command. Runs a test makes in its own process (run_playbook) are not counted; the playbooks a cargoship
  command starts are not counted twice (the command starts its own ansible-playbook by its path).
- node restarts: the engine stand-in writes a line to starts.log at every start; the lines of every host
  of the current lab are read through podman's view of the container's files (no SSH, no exec), before
  and after each test. The starts of a lab build are not counted.
- CPU: the control host's is the pytest worker's own and that of every process it started and waited for
  (rusage: cargoship, ansible-playbook and its workers, ssh clients), the worker's own also apart; the hosts' is what the current lab's
  containers used (their cgroups' cpuacct, tests/lab/labhosts.py); of a lab replaced during the test, only
  the new one's. With several workers on few cores, the CPU figures add up where wall times overlap.
- lab builds: the lab manager counts them, and which of them replaced a lab an earlier test had left
  changed (tests/lab/labhosts.py: a lab is handed on only if its fingerprint is the one it was built with).
Nothing here may fail a test: a figure that cannot be read is left out (None)."""

from __future__ import annotations

import atexit
import json
import os
import resource
import shutil
import stat
import sys
import tempfile
import time
from pathlib import Path

LEDGER = os.environ.get("CARGOSHIP_TEST_LEDGER")
WRAPPED = ("cargoship", "ansible-playbook")


def install_wrappers(real_bin: Path) -> Path | None:
    """A directory of wrappers for the commands counted, to put first on PATH (None when no ledger)."""
    if not LEDGER:
        return None
    directory = Path(tempfile.mkdtemp(prefix="cargoship-ledger-bin-"))
    # Gone when this process ends (each pytest worker makes its own).
    atexit.register(shutil.rmtree, directory, True)
    runs = f"{LEDGER}.runs"
    for name in WRAPPED:
        wrapper = directory / name
        wrapper.write_text(
            "#!/bin/sh\n"
            f'printf "%s\\t%s\\n" "{name}" "${{PYTEST_CURRENT_TEST%% (*}}" >> "{runs}" 2>/dev/null\n'
            f'exec "{real_bin / name}" "$@"\n'
        )
        wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return directory


def runs_of(nodeid: str) -> dict[str, int]:
    counts = dict.fromkeys(WRAPPED, 0)
    try:
        lines = Path(f"{LEDGER}.runs").read_text().splitlines()
    except OSError:
        return counts
    for line in lines:
        name, test = line.partition("\t")[::2]
        if test == nodeid and name in counts:
            counts[name] += 1
    return counts


def starts_of(manager) -> tuple[object, int] | None:
    """(which lab, engine starts on all its hosts so far), read from the hosts' files as podman sees them."""
    current = getattr(manager, "current", None)
    if current is None:
        return None
    try:
        return current, sum(manager.host_starts())
    except Exception:
        return None


def control_cpu() -> tuple[float, float]:
    """CPU seconds of this process, and of every process it waited for, so far."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def hosts_cpu_of(manager) -> tuple[object, float] | None:
    """(which lab, CPU seconds its hosts used so far)."""
    current = getattr(manager, "current", None)
    if current is None:
        return None
    try:
        return current, manager.hosts_cpu()
    except Exception:
        return None


class Ledger:
    def __init__(self) -> None:
        self.manager = None
        self.before: dict = {}

    def start(self, item) -> None:
        self.before = {
            "time": time.monotonic(),
            "began": time.time(),
            "builds": self.builds(),
            "dirty": len(getattr(self.manager, "dirty", []) or []),
            "starts": starts_of(self.manager),
            "control_cpu": control_cpu(),
            "hosts_cpu": hosts_cpu_of(self.manager),
        }

    def builds(self) -> int:
        return len(getattr(self.manager, "builds", []) or [])

    def finish(self, item, outcome: str) -> None:
        if not LEDGER or not self.before:
            return
        after = starts_of(self.manager)
        before = self.before["starts"]
        restarts = None
        if after is not None:
            if before is not None and before[0] is after[0]:
                restarts = after[1] - before[1]
            else:  # a lab built during this test: its own first starts are not restarts
                restarts = after[1] - getattr(self.manager, "starts_at_build", after[1])
        builds = self.builds() - self.before["builds"]
        (own_cpu, commands_cpu), (own_before, commands_before) = control_cpu(), self.before["control_cpu"]
        hosts_after, hosts_before = hosts_cpu_of(self.manager), self.before["hosts_cpu"]
        hosts_cpu = None
        if hosts_after is not None:
            same_lab = hosts_before is not None and hosts_before[0] is hosts_after[0]
            # A lab built during the test: all its hosts used is the test's.
            hosts_cpu = round(hosts_after[1] - (hosts_before[1] if same_lab else 0), 1)
        record = {
            "test": item.nodeid,
            "module": item.nodeid.split("::", 1)[0],
            "lab": item.get_closest_marker("lab") is not None,
            "seconds": round(time.monotonic() - self.before["time"], 2),
            # When it began (epoch seconds) and on which worker: the run's timeline, lane by lane.
            "began": round(self.before["began"], 2),
            "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
            "outcome": outcome,
            "runs": runs_of(item.nodeid),
            "restarts": restarts,
            # The test's own process (pytest, the API client, the lab's checks) and the commands it ran.
            "control_cpu": round(own_cpu + commands_cpu - own_before - commands_before, 1),
            "pytest_cpu": round(own_cpu - own_before, 1),
            "hosts_cpu": hosts_cpu,
            "lab_builds": builds,
            # of them, builds of a lab an earlier test had left changed (its fingerprint differed)
            "lab_builds_dirty": len(getattr(self.manager, "dirty", []) or []) - self.before["dirty"],
            "lab_build_seconds": round(sum((getattr(self.manager, "builds", []) or [])[-builds:]) if builds else 0, 1),
        }
        try:
            with open(LEDGER, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(record) + "\n")
        except OSError as exc:
            print(f"suite ledger: cannot write {LEDGER}: {exc}", file=sys.stderr)


LEDGER_STATE = Ledger()
