"""How the command sets up ansible-playbook: which ansible.cfg, which SSH options."""

from __future__ import annotations

from cargoship_runner.runner import (
    DEFAULT_FORKS,
    SSH_KEEPALIVE,
    ansible_cfg,
    control_path_dir,
    forks,
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


def test_without_ssh_args_ansibles_defaults_are_kept(tmp_path, monkeypatch):
    monkeypatch.delenv("ANSIBLE_SSH_ARGS", raising=False)
    config = tmp_path / "ansible.cfg"
    config.write_text("[defaults]\nforks = 5\n")
    assert ssh_args(config) == ssh_args(None) == f"-C -o ControlMaster=auto -o ControlPersist=60s {SSH_KEEPALIVE}"


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


def test_vars_plugins_run_once_per_inventory_unless_the_user_chose(tmp_path, monkeypatch):
    monkeypatch.delenv("ANSIBLE_RUN_VARS_PLUGINS", raising=False)
    plain = tmp_path / "plain.cfg"
    plain.write_text("[defaults]\nforks = 5\n")
    chosen = tmp_path / "chosen.cfg"
    chosen.write_text("[defaults]\nrun_vars_plugins = demand\n")
    assert vars_plugins_stage(plain) == vars_plugins_stage(None) == {"ANSIBLE_RUN_VARS_PLUGINS": "start"}
    assert vars_plugins_stage(chosen) == {}, "the user's ansible.cfg applies"
    monkeypatch.setenv("ANSIBLE_RUN_VARS_PLUGINS", "demand")
    assert vars_plugins_stage(plain) == {}, "the user's environment applies"


def test_each_run_has_ssh_connections_of_its_own_unless_the_user_chose_where_they_go(tmp_path, monkeypatch):
    """A master connection an earlier run left (ControlPersist) is never reused: after a network outage its
    TCP stream is dead and a session sent down it waits (the soak found a rerun failing on it)."""
    for name in ("ANSIBLE_SSH_CONTROL_PATH", "ANSIBLE_SSH_CONTROL_PATH_DIR"):
        monkeypatch.delenv(name, raising=False)
    private = tmp_path / "run"
    plain = tmp_path / "plain.cfg"
    plain.write_text("[ssh_connection]\nssh_args = -o ControlMaster=auto -o ControlPersist=60s\n")
    assert (
        control_path_dir(plain, private)
        == control_path_dir(None, private)
        == {"ANSIBLE_SSH_CONTROL_PATH_DIR": str(private / "cp")}
    )
    for key in ("control_path", "control_path_dir"):
        chosen = tmp_path / f"{key}.cfg"
        chosen.write_text(f"[ssh_connection]\n{key} = /somewhere/%%C\n")
        assert control_path_dir(chosen, private) == {}, f"the user's {key} applies"
    monkeypatch.setenv("ANSIBLE_SSH_CONTROL_PATH_DIR", "/theirs")
    assert control_path_dir(plain, private) == {}, "the user's environment applies"
