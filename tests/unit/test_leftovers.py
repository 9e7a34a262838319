"""What a killed run leaves in the temporary directory is removed by the next run, and nothing else is."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from cargoship_runner import leftovers
from cargoship_runner.collection import lock_keeper


def dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def owned_by(
    directory: Path, pid: int, start: str | None, boot: str | None = None, namespace: str | None = None
) -> Path:
    directory.mkdir()
    boot, namespace = boot or leftovers.boot_id(), namespace or leftovers.pid_namespace()
    (directory / leftovers.OWNER_FILE).write_text(f"{pid} {start} {boot} {namespace}\n")
    (directory / "artifacts").mkdir()
    (directory / "artifacts" / "event.json").write_text("{}")
    return directory


def sweep(base: Path) -> list[str]:
    closed = []

    def close(path: Path) -> None:
        closed.append(path.name)
        subprocess.run(["rm", "-rf", str(path)], check=True)

    removed = leftovers.sweep(close, bases=(str(base),))
    return sorted(path.name for path in removed) + [f"closed:{name}" for name in closed]


def test_a_dead_runs_directories_go_and_a_live_ones_stay(tmp_path):
    me = os.getpid()
    owned_by(tmp_path / "cargoship-run-dead", dead_pid(), "1")
    owned_by(tmp_path / "cargoship-ssh-dead", dead_pid(), "1")
    owned_by(tmp_path / "cargoship-run-live", me, leftovers.process_start(me))
    assert sweep(tmp_path) == ["cargoship-run-dead", "cargoship-ssh-dead", "closed:cargoship-ssh-dead"]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["cargoship-run-live"]


def test_a_reused_pid_does_not_keep_a_dead_runs_directory(tmp_path):
    # The pid is alive (this process), but it started at another time than the run that wrote it.
    me = os.getpid()
    owned_by(tmp_path / "cargoship-run-reused", me, str(int(leftovers.process_start(me)) + 1))
    assert sweep(tmp_path) == ["cargoship-run-reused"]


def test_an_owner_of_an_earlier_boot_is_gone_and_one_of_another_pid_namespace_is_left_alone(tmp_path):
    # A directory left before the machine restarted (a /tmp that survives reboots), whatever its pid; one
    # a run in a container wrote into a shared /tmp, whose pids this process cannot look at.
    owned_by(tmp_path / "cargoship-run-before-reboot", os.getpid(), "1", boot="an-earlier-boot")
    owned_by(tmp_path / "cargoship-run-container", dead_pid(), "1", namespace="pid:[1]")
    assert sweep(tmp_path) == ["cargoship-run-before-reboot"]


def test_what_is_not_plainly_a_dead_runs_own_directory_stays(tmp_path):
    # Being made right now (no owner file yet), not ours by its name, a symbolic link to a dead run's
    # directory, a file: none of it is removed.
    (tmp_path / "cargoship-run-new").mkdir()
    owned_by(tmp_path / "elsewhere", dead_pid(), "1")
    (tmp_path / "cargoship-run-link").symlink_to(tmp_path / "elsewhere")
    owned_by(tmp_path / "other-tool-run-x", dead_pid(), "1")
    (tmp_path / "cargoship-run-file").write_text("")
    garbled = tmp_path / "cargoship-run-garbled"
    garbled.mkdir()
    (garbled / leftovers.OWNER_FILE).write_text("not a pid\n")
    assert sweep(tmp_path) == []
    assert (tmp_path / "elsewhere" / "artifacts" / "event.json").exists()


def test_the_owner_file_names_this_process_as_it_started(tmp_path):
    leftovers.claim(tmp_path)
    pid, start, boot, namespace = (tmp_path / leftovers.OWNER_FILE).read_text().split()
    assert int(pid) == os.getpid() and start == leftovers.process_start(os.getpid())
    assert boot == leftovers.boot_id() != "-" and namespace == leftovers.pid_namespace() != "-"
    assert not leftovers.owner_gone(tmp_path)
    assert (tmp_path / leftovers.OWNER_FILE).stat().st_mode & 0o777 == 0o600
    leftovers.disown(tmp_path)
    assert not leftovers.owner_gone(tmp_path), "a kept directory (no owner) is never taken for a dead run's"


def test_a_keeper_spool_goes_once_its_run_and_keeper_are_gone(tmp_path):
    prefix = leftovers.keeper_prefix()
    dead = tmp_path / f"{prefix}{dead_pid()}"
    dead.mkdir(mode=0o700)
    (dead / "c1.json").write_text("{}")
    running = tmp_path / f"{prefix}{os.getpid()}"
    running.mkdir(mode=0o700)
    # A keeper still serving a spool whose run is gone keeps it: it removes it itself as it ends.
    served = Path(lock_keeper().private_spool(dead_pid(), base=str(tmp_path)))
    keeper = subprocess.Popen(
        [sys.executable, "-c", "import time; print(flush=True); time.sleep(60)", lock_keeper().__file__, str(served)],
        stdout=subprocess.PIPE,
    )
    try:
        # Up: right after a vfork-ed start, the process's command line may still read empty.
        keeper.stdout.readline()
        (served / "keeper.json").write_text(f'{{"pid": {keeper.pid}}}')
        (served / "keeper.json").chmod(0o600)
        assert sweep(tmp_path) == [dead.name]
    finally:
        keeper.kill()
        keeper.wait()
        keeper.stdout.close()
    assert sweep(tmp_path) == [served.name]
    assert running.is_dir()
