# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Keeps a run's host locks fresh for exactly as long as the run's ansible-playbook process lives.

Started once per run by the ``lock_heartbeat`` action (``python _lock_keeper.py SPOOL PARENT_PID
INTERVAL [CONTROL_PID]``). Every INTERVAL seconds it runs, for each host registered in SPOOL, the ssh command that
touches that host's lock if this run still holds it.

SPOOL is private to the user running Ansible: created by ``private_spool`` with mode 0700, and refused
if it is anything else (another user's directory, a symbolic link, open to others). The keeper runs a
command only from a file in it that this user owns and nobody else can write: a file another local
user could plant is never run as the operator, who holds the fleet's SSH keys. It checks every second whether PARENT_PID is
still alive and exits when it is not, also after a SIGKILL of the parent: the locks then go stale on
their own, and nothing keeps touching them. It never outlives the run it serves.

Under the ``cargoship`` command, CONTROL_PID is the command's own process. ansible-runner's child
would outlive a SIGKILLed command and go on restarting nodes with nobody watching; so when the
command dies, the keeper ends the run (its whole process group) before it exits.
"""

from __future__ import annotations

import fcntl
import glob
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

TOUCH_TIMEOUT_SECONDS = 20
# The touch command's exit codes when the lock is no longer this run's: released (gone), or held by
# another run (taken over, as a stale lock: this run must not go on).
NOT_OURS = 3
TAKEN = 4
# ssh's exit code when it cannot reach the host: Ansible itself deals with unreachable hosts.
UNREACHABLE = 255
# Rounds in a row a host's touch may fail (sudo asks for a password, a read-only disk) before the run is
# stopped: a lock nobody can touch goes stale while the run goes on, and another run may take the host.
FAILED_ROUNDS_ALLOWED = 2
# How long a worker that starts the keeper waits for it to be seen running.
KEEPER_START_SECONDS = 2.0


def process_start(pid: int) -> str | None:
    """The start time of a live process (clock ticks since boot, /proc/PID/stat field 22), else None."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            # The state follows the command name in parentheses; a zombie has exited already.
            fields = handle.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError, ValueError):
        return None
    return fields[19] if len(fields) > 19 and fields[0] != "Z" else None


def alive(pid: int) -> bool:
    return process_start(pid) is not None


class UnsafeSpool(Exception):
    """The keeper's directory is not this user's own private directory."""


def owned_privately(info: os.stat_result) -> bool:
    return info.st_uid == os.geteuid() and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def check_private(spool: str) -> None:
    info = os.lstat(spool)
    if not stat.S_ISDIR(info.st_mode) or not owned_privately(info) or stat.S_IMODE(info.st_mode) != 0o700:
        raise UnsafeSpool(
            f"refusing the lock keeper's directory {spool}: it is not a private directory of this user "
            f"(uid {info.st_uid}, mode {stat.filemode(info.st_mode)}); another user may have put it there. "
            "Nothing in it was run. Remove it, or set TMPDIR to a directory of your own"
        )


def spool_path(run_pid: int, base: str | None = None) -> str:
    """Where the keeper of the run ``run_pid`` keeps its state: every worker of the run must find it."""
    return os.path.join(base or tempfile.gettempdir(), f"cargoship-keeper-{os.geteuid()}-{run_pid}")


def private_spool(run_pid: int, base: str | None = None) -> str:
    """The run's keeper directory: made here, 0700, by whichever worker comes first; the others find it
    and check that it is this user's own before using it."""
    spool = spool_path(run_pid, base)
    try:
        os.mkdir(spool, 0o700)
    except FileExistsError:
        pass
    check_private(spool)
    return spool


def write_entry(spool: str, name: str, entry: dict) -> None:
    """Register a host: a whole file, owned by this user, mode 0600, put in place by a rename."""
    path = os.path.join(spool, name)
    fd, tmp = tempfile.mkstemp(dir=spool, prefix=".entry-")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(entry, handle)
    os.replace(tmp, path)


def read_entry(path: str) -> dict | None:
    """An entry's content if this user owns it and nobody else can write it, else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd, encoding="utf-8") as handle:
        if not owned_privately(os.fstat(handle.fileno())):
            return None
        try:
            return json.load(handle)
        except ValueError:
            return None


def running_keeper(spool: str) -> int | None:
    """The pid of the keeper serving spool, if one runs (a pid file naming another process counts for nothing)."""
    entry = read_entry(os.path.join(spool, "keeper.json"))
    pid = (entry or {}).get("pid")
    if not isinstance(pid, int) or not alive(pid):
        return None
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            argv = handle.read().split(b"\0")
    except OSError:
        return None
    return pid if os.fsencode(__file__) in argv and os.fsencode(spool) in argv else None


def ensure_keeper(spool: str, run_pid: int, interval: int, control: str | None) -> int:
    """Start the run's keeper unless it runs already; one at a time decides (a lock in the spool)."""
    with open(os.path.join(spool, "start.lock"), "a", encoding="ascii") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)
        pid = running_keeper(spool)
        if pid is not None:
            return pid
        keeper = subprocess.Popen(
            [sys.executable, __file__, spool, str(run_pid), str(interval), *([control] if control else [])],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )
        write_entry(spool, "keeper.json", {"pid": keeper.pid})
        # Right after a vfork-ed start the new process's command line may still read empty, and the next
        # worker would take it for no keeper and start a second one: the guard is held until it reads whole.
        deadline = time.monotonic() + KEEPER_START_SECONDS
        while running_keeper(spool) != keeper.pid and keeper.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        return keeper.pid


def touch(entry_path: str) -> tuple[str, str, str]:
    """Touch one host's lock: (entry, outcome, why) with outcome ok, not ours, unreachable or failed."""
    entry = read_entry(entry_path)
    if entry is None:
        return entry_path, "ok", ""
    try:
        done = subprocess.run(
            entry["argv"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=TOUCH_TIMEOUT_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return entry_path, "unreachable", "timed out"
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return entry_path, "failed", str(exc)
    lines = [line.strip() for line in done.stderr.decode("utf-8", "replace").splitlines() if line.strip()]
    outcome = {0: "ok", NOT_OURS: "not ours", TAKEN: "taken", UNREACHABLE: "unreachable"}.get(done.returncode, "failed")
    return entry_path, outcome, (lines[-1][:200] if lines else f"exit {done.returncode}")


def host_of(entry_path: str) -> str:
    return os.path.basename(entry_path)[len("host-") : -len(".json")]


def stop_for(reason: str, parent: int, control: int | None) -> None:
    """Stop the run because a lock cannot be kept: as Ctrl-C would, through the cargoship command when it
    runs the show (it then puts back the nodes it had started on), else ansible-playbook itself."""
    report = os.environ.get("CARGOSHIP_KEEPER_REPORT")
    if report:
        # Whole or not at all (a rename): whoever sees the file reads the reason, never an empty file.
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(report) or ".", prefix=".keeper-stop-")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(reason + "\n")
        os.replace(tmp, report)
    try:
        os.kill(control if control is not None else parent, signal.SIGTERM if control is not None else signal.SIGINT)
    except ProcessLookupError:
        pass


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
    failed_rounds: dict[str, int] = {}
    stopping = False
    with ThreadPoolExecutor(max_workers=20) as pool:
        while alive(parent):
            if control is not None and not alive(control):
                stop_run(parent)
                return
            if not stopping and time.monotonic() >= next_round:
                check_private(spool)
                for entry, outcome, why in pool.map(touch, sorted(glob.glob(os.path.join(spool, "host-*.json")))):
                    if outcome in ("not ours", "taken"):
                        os.unlink(entry)  # released by the run (gone), or taken over (stops the run below)
                    if outcome == "taken" and not stopping:
                        stopping = True
                        stop_for(
                            f"the lock on {host_of(entry)} was taken over by another run; the run was stopped "
                            "rather than go on without it",
                            parent,
                            control,
                        )
                    # A host the keeper cannot reach is a lock it cannot keep fresh, like any other failure.
                    failing = outcome in ("failed", "unreachable")
                    failed_rounds[entry] = failed_rounds.get(entry, 0) + 1 if failing else 0
                    if failed_rounds[entry] >= FAILED_ROUNDS_ALLOWED and not stopping:
                        stopping = True
                        stop_for(
                            f"the lock on {host_of(entry)} could not be kept fresh ({why}); the run was stopped "
                            "rather than let the lock go stale while it went on",
                            parent,
                            control,
                        )
                next_round = time.monotonic() + interval
            time.sleep(1)


def advertise(pid: int, pidfile: str | None) -> None:
    """Tell the cargoship command which keeper serves its run (a whole file, put in place by a rename)."""
    if not pidfile:
        return
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(pidfile), prefix=".keeper-")
    with os.fdopen(fd, "w", encoding="ascii") as handle:
        handle.write(str(pid))
    os.replace(tmp, pidfile)


def unregister(run_pid: int, host: str, base: str | None = None) -> None:
    """Stop touching a host's lock: the run releases it (a lock another run takes next is then theirs,
    not a take-over of this run's)."""
    spool = spool_path(run_pid, base)
    try:
        check_private(spool)
    except (OSError, UnsafeSpool):
        return  # no keeper for this run (or not a directory of ours): nothing registered to remove
    try:
        os.unlink(os.path.join(spool, f"host-{host}.json"))
    except FileNotFoundError:
        pass


def main() -> int:
    spool, parent, interval = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    control = int(sys.argv[4]) if len(sys.argv) > 4 else None
    ours = False
    try:
        check_private(spool)
        ours = True
        keep(spool, parent, interval, control)
    except (OSError, UnsafeSpool):
        return 1  # not (or no longer) this user's private directory: nothing more is run from it
    finally:
        if ours:
            shutil.rmtree(spool, ignore_errors=True)
    # Ended with its run: the command must not take this end for a keeper that died under a live run.
    pidfile = os.environ.get("CARGOSHIP_KEEPER_PIDFILE")
    if pidfile and not alive(parent):
        try:
            os.unlink(pidfile)
        except FileNotFoundError:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
