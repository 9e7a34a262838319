"""The lock keeper runs nothing another local user could have put in its way."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ansible_collections.cargoship.engine.plugins.plugin_utils import _lock_keeper

NOBODY = 65534
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="planting files as another user needs root")


def plant(spool: Path, marker: Path, owner: int = NOBODY, mode: int = 0o700) -> None:
    """What another user could leave where the keeper looks: a host entry whose command would run as the
    operator, and a pid file naming a live process so that no keeper would be started."""
    spool.mkdir(mode=mode)
    spool.chmod(mode)
    (spool / "host-victim.json").write_text(json.dumps({"argv": ["touch", str(marker)]}))
    (spool / "keeper.json").write_text(json.dumps({"pid": 1}))
    for path in (spool, *spool.iterdir()):
        os.chown(path, owner, owner)


def run_keeper(spool: Path, interval: float = 0.2) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, _lock_keeper.__file__, str(spool), str(os.getpid()), str(interval)])


@needs_root
@pytest.mark.parametrize(
    ("owner", "mode"), [(NOBODY, 0o700), (0, 0o777), (0, 0o755)], ids=["another-user", "world-writable", "open"]
)
def test_a_directory_that_is_not_the_users_own_is_refused_and_nothing_planted_runs(tmp_path, owner, mode):
    marker = tmp_path / "planted-command-ran"
    spool = Path(_lock_keeper.spool_path(4242, base=str(tmp_path)))
    plant(spool, marker, owner, mode)
    with pytest.raises(_lock_keeper.UnsafeSpool, match="refusing the lock keeper's directory"):
        _lock_keeper.private_spool(4242, base=str(tmp_path))
    keeper = run_keeper(spool)
    assert keeper.wait(timeout=10) == 1
    assert not marker.exists()
    assert (spool / "host-victim.json").exists(), "the other user's files are left alone"


def test_a_symbolic_link_in_place_of_the_directory_is_refused(tmp_path):
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    os.symlink(target, _lock_keeper.spool_path(4243, base=str(tmp_path)))
    with pytest.raises(_lock_keeper.UnsafeSpool):
        _lock_keeper.private_spool(4243, base=str(tmp_path))


@needs_root
def test_in_its_own_directory_the_keeper_runs_only_entries_the_user_owns(tmp_path):
    spool = Path(_lock_keeper.private_spool(4244, base=str(tmp_path)))
    assert oct(spool.stat().st_mode & 0o777) == oct(0o700)
    mine, theirs = tmp_path / "mine-ran", tmp_path / "theirs-ran"
    _lock_keeper.write_entry(str(spool), "host-mine.json", {"argv": ["touch", str(mine)]})
    (spool / "host-theirs.json").write_text(json.dumps({"argv": ["touch", str(theirs)]}))
    os.chown(spool / "host-theirs.json", NOBODY, NOBODY)
    keeper = run_keeper(spool)
    try:
        deadline = time.monotonic() + 10
        while not mine.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.5)
    finally:
        keeper.kill()
        keeper.wait()
    assert mine.exists()
    assert not theirs.exists()


@needs_root
def test_a_run_finding_a_planted_directory_fails_and_runs_nothing(tmp_path):
    """The real action, in a real ansible-playbook: the directory planted is the one this very run's keeper
    would use (the shell plants it for its own pid, then becomes ansible-playbook)."""
    marker = tmp_path / "planted-command-ran"
    playbook = tmp_path / "keep.yml"
    playbook.write_text(
        "- hosts: localhost\n  connection: local\n  gather_facts: false\n  tasks:\n"
        "    - cargoship.engine.lock_heartbeat:\n"
        f"        run_id: test\n        path: {tmp_path / 'lock.json'}\n        interval: 1\n"
    )
    plant_script = (
        "import json, os, sys; from ansible_collections.cargoship.engine.plugins.plugin_utils import _lock_keeper as k; "
        "spool = k.spool_path(int(sys.argv[1])); os.mkdir(spool, 0o700); "
        f"open(os.path.join(spool, 'host-localhost.json'), 'w').write(json.dumps({{'argv': ['touch', {str(marker)!r}]}})); "
        "open(os.path.join(spool, 'keeper.json'), 'w').write(json.dumps({'pid': 1})); "
        f"[os.chown(p, {NOBODY}, {NOBODY}) for p in (spool, *(os.path.join(spool, n) for n in os.listdir(spool)))]; "
        "print(spool)"
    )
    collections = str(Path(__file__).resolve().parents[2] / ".collections")
    run = subprocess.run(
        [
            "sh",
            "-c",
            f'spool=$("{sys.executable}" -c "$1" $$) && echo "planted $spool" && exec ansible-playbook "$2"',
            "sh",
            plant_script,
            str(playbook),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYTHONPATH": collections},
    )
    spool = run.stdout.split("planted ", 1)[1].split()[0]
    try:
        assert run.returncode == 2, run.stdout + run.stderr
        assert "refusing the lock keeper's directory" in run.stdout
        time.sleep(2.5)  # two touch intervals: a keeper running the planted entry would have done so
        assert not marker.exists()
    finally:
        subprocess.run(["rm", "-rf", spool], check=False)


@pytest.fixture
def control():
    """A process standing for the cargoship command, which the keeper signals when it stops the run."""
    sleeper = subprocess.Popen(["sleep", "60"])
    yield sleeper
    sleeper.kill()
    sleeper.wait()


def keeper_with(tmp_path: Path, host: str, exit_code: int, control) -> tuple[subprocess.Popen, Path]:
    """A keeper (interval 0.2 s) whose one host's touch exits with exit_code, reporting why it stops."""
    spool = Path(_lock_keeper.private_spool(os.getpid(), str(tmp_path)))
    _lock_keeper.write_entry(str(spool), f"host-{host}.json", {"argv": ["sh", "-c", f"echo why >&2; exit {exit_code}"]})
    report = tmp_path / "stop.txt"
    env = {**os.environ, "CARGOSHIP_KEEPER_REPORT": str(report)}
    keeper = subprocess.Popen(
        [sys.executable, _lock_keeper.__file__, str(spool), str(os.getpid()), "0.2", str(control.pid)], env=env
    )
    return keeper, report


@pytest.mark.parametrize(
    ("exit_code", "why"),
    [
        (_lock_keeper.TAKEN, "the lock on w1 was taken over by another run"),
        (_lock_keeper.UNREACHABLE, "the lock on w1 could not be kept fresh (why)"),
        (1, "the lock on w1 could not be kept fresh (why)"),
    ],
    ids=["taken", "unreachable", "failed"],
)
def test_a_lock_taken_over_or_a_host_that_cannot_be_touched_stops_the_run(tmp_path, exit_code, why, control):
    keeper, report = keeper_with(tmp_path, "w1", exit_code, control)
    try:
        deadline = time.monotonic() + 15
        while not report.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert report.exists(), "the keeper went on"
        assert report.read_text().startswith(why)
    finally:
        keeper.kill()
        keeper.wait()


def test_a_released_lock_is_left_alone_and_a_host_unregistered_before_its_release_is_not_touched(tmp_path, control):
    keeper, report = keeper_with(tmp_path, "w1", _lock_keeper.NOT_OURS, control)
    try:
        spool = Path(_lock_keeper.spool_path(os.getpid(), str(tmp_path)))
        deadline = time.monotonic() + 10
        while (spool / "host-w1.json").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not (spool / "host-w1.json").exists(), "a released lock is no longer touched"
        time.sleep(1)
        assert not report.exists(), "a release does not stop the run"
    finally:
        keeper.kill()
        keeper.wait()


def test_a_host_is_unregistered_from_its_runs_keeper_before_the_release(tmp_path):
    spool = Path(_lock_keeper.private_spool(os.getpid(), str(tmp_path)))
    for host in ("w1", "w2"):
        _lock_keeper.write_entry(str(spool), f"host-{host}.json", {"argv": ["true"]})
    _lock_keeper.unregister(os.getpid(), "w1", str(tmp_path))
    assert sorted(p.name for p in spool.glob("host-*")) == ["host-w2.json"]
    _lock_keeper.unregister(os.getpid() + 1, "w2", str(tmp_path))  # another run's spool: there is none
    assert sorted(p.name for p in spool.glob("host-*")) == ["host-w2.json"]


def test_workers_starting_the_keeper_at_once_start_one(tmp_path, control, monkeypatch):
    """Every worker of a run asks for the keeper as its first host registers; they start one between them,
    also when the next asks while the first one's keeper is still being started. Right after a vfork-ed
    start, /proc/PID/cmdline reads empty until the kernel has set up the new program (seen on this machine
    under load, in about one start of a hundred): that window is widened here to 0.3 s."""
    real = _lock_keeper.running_keeper
    first_seen: dict[int, float] = {}

    def running_keeper(spool: str) -> int | None:
        entry = _lock_keeper.read_entry(os.path.join(spool, "keeper.json")) or {}
        started = first_seen.setdefault(entry.get("pid"), time.monotonic())
        return real(spool) if time.monotonic() - started > 0.3 else None

    monkeypatch.setattr(_lock_keeper, "running_keeper", running_keeper)
    spool = _lock_keeper.private_spool(control.pid, str(tmp_path))
    with ThreadPoolExecutor(max_workers=4) as pool:
        pids = set(pool.map(lambda _: _lock_keeper.ensure_keeper(spool, control.pid, 1, None), range(4)))
    found = subprocess.run(["pgrep", "-f", spool], capture_output=True, text=True, check=False).stdout.split()
    control.kill()
    control.wait()
    for pid in found:  # each keeper ends within a second of its run
        while _lock_keeper.alive(int(pid)):
            time.sleep(0.05)
    assert len(pids) == 1 and len(found) == 1, (pids, found)
