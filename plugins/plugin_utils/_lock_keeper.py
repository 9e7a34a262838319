# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Keeps a run's host locks fresh for exactly as long as the run's ansible-playbook process lives.

Started once per run by the ``lock_heartbeat`` action (``python _lock_keeper.py SPOOL PARENT_PID
INTERVAL [CONTROL_PID]``). Every INTERVAL seconds it runs, for each host registered in SPOOL, the ssh command that
touches that host's lock if this run still holds it. It checks every second whether PARENT_PID is
still alive and exits when it is not, also after a SIGKILL of the parent: the locks then go stale on
their own, and nothing keeps touching them. It never outlives the run it serves.

Under the ``cargoship`` command, CONTROL_PID is the command's own process. ansible-runner's child
would outlive a SIGKILLed command and go on restarting nodes with nobody watching; so when the
command dies, the keeper ends the run (its whole process group) before it exits.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

TOUCH_TIMEOUT_SECONDS = 20


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            # The state follows the command name in parentheses; a zombie has exited already.
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def touch(entry_path: str) -> None:
    try:
        with open(entry_path, encoding="utf-8") as handle:
            argv = json.load(handle)["argv"]
        subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=TOUCH_TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, ValueError, KeyError, subprocess.TimeoutExpired):
        pass  # the next round tries again; a lock is stale only after several missed touches


def stop_run(run_pid: int) -> None:
    """SIGTERM, then SIGKILL, to the run: its process group if it leads one (ansible-runner starts it in
    a session of its own, with its forks), else the process alone, never a group it merely belongs to."""
    try:
        leads_group = os.getpgid(run_pid) == run_pid
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if leads_group:
                os.killpg(run_pid, sig)
            else:
                os.kill(run_pid, sig)
            for _second in range(5):
                if not alive(run_pid):
                    return
                time.sleep(1)
    except ProcessLookupError:
        pass


def keep(spool: str, parent: int, interval: float, control: int | None) -> None:
    next_round = time.monotonic() + interval
    with ThreadPoolExecutor(max_workers=20) as pool:
        while alive(parent):
            if control is not None and not alive(control):
                stop_run(parent)
                return
            if time.monotonic() >= next_round:
                list(pool.map(touch, sorted(glob.glob(os.path.join(spool, "host-*.json")))))
                next_round = time.monotonic() + interval
            time.sleep(1)


def main() -> int:
    spool, parent, interval = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    control = int(sys.argv[4]) if len(sys.argv) > 4 else None
    try:
        keep(spool, parent, interval, control)
    finally:
        shutil.rmtree(spool, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
