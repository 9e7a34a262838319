"""How the command sets up ansible-playbook: which ansible.cfg, which SSH options."""

from __future__ import annotations

from cargoship_runner.runner import DEFAULT_FORKS, SSH_KEEPALIVE, ansible_cfg, forks, ssh_args, vars_plugins_stage


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
