"""How the command sets up ansible-playbook: which ansible.cfg, which SSH options."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from cargoship_runner import recovery, runner
from cargoship_runner.runner import (
    DEFAULT_FORKS,
    SOCKET_PATH_MAX,
    SSH_KEEPALIVE,
    ansible_cfg,
    close_connections,
    forks,
    own_control_path_dir,
    ssh_args,
    vars_plugins_stage,
)


def test_the_users_ssh_args_are_kept_and_keepalives_appended(tmp_path, monkeypatch):
    monkeypatch.delenv("ANSIBLE_SSH_ARGS", raising=False)
    config = tmp_path / "ansible.cfg"
    config.write_text("[ssh_connection]\nssh_args = -o ProxyJump=bastion -o ControlPersist=5m\n")
    assert ssh_args(config) == f"-o ProxyJump=bastion -o ControlPersist=5m {SSH_KEEPALIVE}"
    monkeypatch.setenv("ANSIBLE_SSH_ARGS", "-o ServerAliveInterval=2")
    assert ssh_args(config).startswith("-o ServerAliveInterval=2 "), "the environment wins, its keepalive first"


def test_without_ssh_args_ansibles_defaults_are_kept_but_compression(tmp_path, monkeypatch):
    monkeypatch.delenv("ANSIBLE_SSH_ARGS", raising=False)
    config = tmp_path / "ansible.cfg"
    config.write_text("[defaults]\nforks = 5\n")
    assert ssh_args(config) == ssh_args(None) == f"-o ControlMaster=auto -o ControlPersist=60s {SSH_KEEPALIVE}"


def test_the_ansible_cfg_is_found_as_ansible_finds_it(tmp_path, monkeypatch):
    monkeypatch.delenv("ANSIBLE_CONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ansible.cfg").write_text("[defaults]\n")
    assert ansible_cfg() == tmp_path / "ansible.cfg"
    elsewhere = tmp_path / "conf"
    elsewhere.mkdir()
    (elsewhere / "ansible.cfg").write_text("[defaults]\n")
    monkeypatch.setenv("ANSIBLE_CONFIG", str(elsewhere))
    assert ansible_cfg() == elsewhere / "ansible.cfg"


def test_forks_come_from_the_option_then_the_users_settings_then_a_fleet_sized_default(tmp_path, monkeypatch):
    monkeypatch.delenv("ANSIBLE_FORKS", raising=False)
    plain = tmp_path / "plain.cfg"
    plain.write_text("[defaults]\n")
    tuned = tmp_path / "tuned.cfg"
    tuned.write_text("[defaults]\nforks = 7\n")
    assert forks(3, tuned) == 3
    assert forks(None, tuned) is None, "ansible.cfg's forks apply"
    assert forks(None, plain) == forks(None, None) == DEFAULT_FORKS
    monkeypatch.setenv("ANSIBLE_FORKS", "9")
    assert forks(None, plain) is None


@pytest.mark.parametrize(
    ("setting", "variable", "chosen_cfg", "ours"),
    [
        (vars_plugins_stage, "ANSIBLE_RUN_VARS_PLUGINS", "[defaults]\nrun_vars_plugins = demand\n", "start"),
        (
            runner.inventory_strictness,
            "ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED",
            "[inventory]\nany_unparsed_is_failed = false\n",
            "True",
        ),
    ],
    ids=["vars-plugins-once", "unparsed-inventory-fails"],
)
def test_settings_differing_from_ansibles_apply_unless_the_user_chose(
    tmp_path, monkeypatch, setting, variable, chosen_cfg, ours
):
    monkeypatch.delenv(variable, raising=False)
    plain = tmp_path / "plain.cfg"
    plain.write_text("[defaults]\nforks = 5\n")
    chosen = tmp_path / "chosen.cfg"
    chosen.write_text(chosen_cfg)
    assert setting(plain) == setting(None) == {variable: ours}
    assert setting(chosen) == {}, "the user's ansible.cfg applies"
    monkeypatch.setenv(variable, "whatever")
    assert setting(plain) == {}, "the user's environment applies"


def test_each_inventory_plugins_reason_is_shown_with_the_parse_error():
    """The error says only that no plugin could read the source; each plugin's warning says why."""
    output = (
        "[WARNING]: Failed to parse inventory with 'yaml' plugin: host range must be begin:end or begin:end:step\n"
        "\nFailed to parse inventory with 'yaml' plugin.\n\n<<< caused by >>>\n\nhost range must be begin:end\n"
        "Origin: <inventory plugin 'yaml' with source '/i/hosts.yml'>\n"
        "[ERROR]: Completely failed to parse inventory source /i/hosts.yml\n"
    )
    assert runner.error_lines(output) == [
        "Failed to parse inventory with 'yaml' plugin: host range must be begin:end or begin:end:step",
        "Origin: <inventory plugin 'yaml' with source '/i/hosts.yml'>",
        "[ERROR]: Completely failed to parse inventory source /i/hosts.yml",
    ]


def test_each_run_has_ssh_connections_of_its_own_unless_the_user_chose_where_they_go(tmp_path, monkeypatch):
    """A master connection an earlier run left (ControlPersist) is never reused: after a network outage its
    TCP stream is dead and a session sent down it waits (the soak found a rerun failing on it)."""
    for name in ("ANSIBLE_SSH_CONTROL_PATH", "ANSIBLE_SSH_CONTROL_PATH_DIR"):
        monkeypatch.delenv(name, raising=False)
    plain = tmp_path / "plain.cfg"
    plain.write_text("[ssh_connection]\nssh_args = -o ControlMaster=auto -o ControlPersist=60s\n")
    first, second = own_control_path_dir(plain), own_control_path_dir(None)
    try:
        assert first != second and first.is_dir() and second.is_dir()
        assert first.stat().st_mode & 0o777 == 0o700, "only the user reaches their connections"
    finally:
        close_connections(first)
        close_connections(second)
    assert not first.exists() and not second.exists()
    for key in ("control_path", "control_path_dir"):
        chosen = tmp_path / f"{key}.cfg"
        chosen.write_text(f"[ssh_connection]\n{key} = /somewhere/%%C\n")
        assert own_control_path_dir(chosen) is None, f"the user's {key} applies"
    monkeypatch.setenv("ANSIBLE_SSH_CONTROL_PATH_DIR", "/theirs")
    assert own_control_path_dir(plain) is None, "the user's environment applies"


def test_the_connections_directory_keeps_socket_paths_within_the_unix_limit(tmp_path, monkeypatch):
    """With a temporary directory deep enough to pass the limit, the directory goes under /tmp: a socket
    whose name is as long as ssh's is then made there (ssh would fail to make one past the limit)."""
    for name in ("ANSIBLE_SSH_CONTROL_PATH", "ANSIBLE_SSH_CONTROL_PATH_DIR"):
        monkeypatch.delenv(name, raising=False)
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    directory = own_control_path_dir(None)
    try:
        assert directory.parent == Path("/tmp")
        longest = directory / "0123456789.0123456789abcdef"
        assert len(os.fsencode(longest)) <= SOCKET_PATH_MAX
        with socket.socket(socket.AF_UNIX) as sock:
            sock.bind(str(longest))
        with socket.socket(socket.AF_UNIX) as sock, pytest.raises(OSError):
            sock.bind(str(deep / "0123456789.0123456789abcdef"))
    finally:
        close_connections(directory)
    assert not directory.exists()


def test_a_runs_master_connections_end_with_it(tmp_path):
    """close_connections tells each master in the run's directory to exit (ssh -O exit), so none lingers
    for ControlPersist after the run."""
    directory = tmp_path / "cp"
    directory.mkdir()
    sock = directory / "abc"
    # A real ssh master needs a host: this one listens where a master would and answers nothing, so the
    # exit request must give up in its bounded wait and the directory still goes.
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(sock))
    listener.listen()
    try:
        close_connections(directory, wait=2.0)
    finally:
        listener.close()
    assert not directory.exists()
    assert subprocess.run(["pgrep", "-f", f"ControlPath={sock}"], check=False).returncode == 1


def test_ctrl_c_right_after_the_recovery_is_offered_stops_it_and_says_how_to_finish(tmp_path, monkeypatch, capsys):
    """The second Ctrl-C may come before the recovery's run has begun: it is caught, never an abort."""
    seen = {}

    def run_playbook(options, on_event=None, interrupted=None):
        seen["stopped before the run"] = interrupted.is_set()
        return runner.RunOutcome(rc=1, report=None, unreachable=[], run_id="r1", interrupted=interrupted.is_set())

    def print_then_ctrl_c(*args, **kwargs):
        print(*args, file=sys.stderr)
        if "Ctrl-C again to stop" in str(args[0]):
            os.kill(os.getpid(), signal.SIGINT)  # as the user's second Ctrl-C, as soon as it is offered

    monkeypatch.setattr(recovery, "run_playbook", run_playbook)
    monkeypatch.setattr(recovery.errors, "print", print_then_ctrl_c)
    before = signal.getsignal(signal.SIGINT)
    options = runner.RunOptions(playbook="engine_config_sync", inventory=tmp_path / "inv.yml")
    recovery.recover(options, "r1", ["c1"])
    assert seen == {"stopped before the run": True}
    err = capsys.readouterr().err
    assert "c1: NOT recovered (stopped by Ctrl-C)" in err
    assert "cargoship.engine.recover -e cargoship_run_id=r1 --limit c1" in err
    assert signal.getsignal(signal.SIGINT) is before


def test_a_run_whose_stop_signal_came_before_it_began_stops_at_once(tmp_path):
    """run_playbook given a stop already recorded: the run is cancelled before any host is touched."""
    inventory = tmp_path / "inv.yml"
    hosts = {"ghost": {"ansible_host": "192.0.2.1"}}  # TEST-NET-1: nothing answers there
    inventory.write_text(json.dumps({"all": {"children": {"cargoship_workers": {"hosts": hosts}}}}))
    stopped = threading.Event()
    stopped.set()
    options = runner.RunOptions(playbook="unlock", inventory=inventory, extravars={"cargoship_run_id": "r1"})
    outcome = runner.run_playbook(options, interrupted=stopped)
    assert outcome.interrupted and outcome.rc != 0
    assert not outcome.unreachable  # cancelled before it reached for the host


def test_ansible_failing_before_it_runs_anything_is_named_by_its_exception_and_no_log_is_no_crash(
    tmp_path, monkeypatch
):
    """With a home it cannot write in (a read-only container), Ansible ends with a traceback before any play,
    and the command kept no log: it said "no error message" at best, and at worst failed on the log's
    directory with a traceback of its own."""
    output = (
        "Traceback (most recent call last):\n"
        '  File "/x/ansible/utils/path.py", line 90, in makedirs_safe\n'
        '    raise AnsibleError(f"Unable to create local directories {rpath!r}.") from ex\n'
        "ansible.errors.AnsibleError: Unable to create local directories '/proc/.ansible/tmp': [Errno 2] nope\n"
    )
    assert runner.error_lines(output) == [
        "ansible.errors.AnsibleError: Unable to create local directories '/proc/.ansible/tmp': [Errno 2] nope"
    ]
    assert runner.error_lines("[ERROR]: one\nTraceback (most recent call last):\nValueError: two\n") == ["[ERROR]: one"]
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "a-file" / "state"))
    assert runner.keep_log("output", "run", "engine_config_sync") is None
