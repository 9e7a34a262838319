"""What a killed cargoship command leaves in the temporary directory, and its removal by the next run.

A run works in directories of its own there: the run's directory (ansible-runner's events, which name
the hosts, tasks and diffs of the run), the directory of its SSH master connections, and its lock
keeper's spool (the hosts' lock-touch commands). The run removes them when it ends, also on Ctrl-C or
SIGTERM; a SIGKILL, the kernel's OOM killer or a lost machine leaves them behind, and they pile up run
after run. So each run claims its directories (an owner file naming its process, that process's start
time, which tells a reused process id apart, and the boot and pid namespace both belong to) and the next
run of the same user removes the ones whose owner is gone. An owner in another pid namespace (a container
sharing the temporary directory) cannot be looked at, and its directories stay. A directory without an owner file (a run that is just making it, another tool's)
is left alone, as is anything not a plain directory of this user's.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

from cargoship_runner.collection import lock_keeper

OWNER_FILE = ".cargoship-owner"
RUN_PREFIX = "cargoship-run-"
SSH_PREFIX = "cargoship-ssh-"


def keeper_prefix() -> str:
    """The lock keeper's spools: cargoship-keeper-<euid>-<pid of the run's ansible-playbook>."""
    return f"cargoship-keeper-{os.geteuid()}-"


def process_start(pid: int) -> str | None:
    """The start time of a live process, else None (the lock keeper's reading of /proc/PID/stat)."""
    return lock_keeper().process_start(pid)


def boot_id() -> str:
    """This boot of the machine: process ids and start times mean something only within one."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as handle:
            return handle.read().strip() or "-"
    except OSError:
        return "-"


def pid_namespace() -> str:
    """Which process ids this process sees: a temporary directory shared with a container sees other ones."""
    try:
        return os.readlink("/proc/self/ns/pid").replace(" ", "")
    except OSError:
        return "-"


def claim(directory: Path) -> None:
    """Name this process as the directory's owner (a new file, 0600, never through a planted link): its pid
    and start time, and the boot and pid namespace they belong to."""
    fd = os.open(directory / OWNER_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as handle:
        handle.write(f"{os.getpid()} {process_start(os.getpid())} {boot_id()} {pid_namespace()}\n")


def disown(directory: Path) -> None:
    """Keep the directory for good (--keep-artifacts): without an owner, no later run removes it."""
    (directory / OWNER_FILE).unlink(missing_ok=True)


def owner_gone(directory: Path) -> bool:
    """True only if the directory names an owner and that process no longer runs: its boot is over, or, in
    the pid namespace of this process, no process of that id and start time runs. An owner in another pid
    namespace (a container sharing the temporary directory) cannot be looked at: its directory stays."""
    try:
        fd = os.open(directory / OWNER_FILE, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, encoding="ascii") as handle:
            if os.fstat(handle.fileno()).st_uid != os.geteuid():
                return False
            pid, start, boot, namespace = handle.read(256).split()
    except (OSError, ValueError):
        return False
    if boot != boot_id():
        return boot_id() != "-"
    if namespace != pid_namespace() or namespace == "-":
        return False
    return process_start(int(pid)) != start


def keeper_gone(spool: Path) -> bool:
    """A keeper spool is removed once the run it served (its ansible-playbook) and its keeper are gone."""
    try:
        run_pid = int(spool.name[len(keeper_prefix()) :])
    except ValueError:
        return False
    keeper = lock_keeper()
    return not keeper.alive(run_pid) and keeper.running_keeper(str(spool)) is None


def own_directory(path: Path) -> bool:
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid()


def sweep(close_connections: Callable[[Path], None], bases: tuple[str, ...] | None = None) -> list[Path]:
    """Remove this user's directories left by runs that are gone; return them. Never fails a run."""
    removed = []
    for base in dict.fromkeys(bases or (tempfile.gettempdir(), "/tmp")):
        try:
            names = [entry.name for entry in os.scandir(base)]
        except OSError:
            continue
        for name in names:
            path = Path(base) / name
            if name.startswith((RUN_PREFIX, SSH_PREFIX)):
                gone = own_directory(path) and owner_gone(path)
            elif name.startswith(keeper_prefix()):
                gone = own_directory(path) and keeper_gone(path)
            else:
                continue
            if not gone:
                continue
            try:
                if name.startswith(SSH_PREFIX):
                    # Its master connections may linger (ControlPersist): ended, then the directory goes.
                    close_connections(path)
                else:
                    shutil.rmtree(path)
            except OSError:
                continue
            removed.append(path)
    return removed
