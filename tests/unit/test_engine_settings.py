"""Where the engine takes the settings cargoship depends on: flags, then config files, then environment."""

from __future__ import annotations

from ansible_collections.cargoship.engine.plugins.module_utils import _engine_settings as es
from ansible_collections.cargoship.engine.plugins.module_utils import _systemd as systemd


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_defaults_are_the_hostname_lower_cased_and_the_engines_own_paths(tmp_path):
    config = tmp_path / "config.yaml"
    resolved = es.resolve("k3s", ["/usr/local/bin/k3s", "agent", "--config", str(config)], {}, "Worker-1")
    assert resolved["node_name"] == "worker-1"
    assert resolved["node_name_from"] == "the hostname, lower-cased"
    assert resolved["data_dir"] == "/var/lib/rancher/k3s"
    assert resolved["private_registry"] == "/etc/rancher/k3s/registries.yaml"
    assert resolved["with_node_id"] is False


def test_drop_ins_follow_the_config_file_in_order_the_last_value_winning(tmp_path):
    config = tmp_path / "config.yaml"
    write(config, "node-name: from-config\ndata-dir: /srv/k3s\n")
    write(tmp_path / "config.yaml.d" / "10-a.yaml", "node-name: from-10\n")
    write(tmp_path / "config.yaml.d" / ".hidden.YML", "private-registry: /srv/registries.yaml\n")
    write(tmp_path / "config.yaml.d" / "20-b.yml", "node-name: From-20\n")
    write(tmp_path / "config.yaml.d" / "30-c.txt", "node-name: ignored\n")
    resolved = es.resolve("k3s", ["k3s", "server", f"--config={config}"], {"K3S_NODE_NAME": "env"}, "host")
    assert resolved["config_files"] == [
        str(config),
        str(tmp_path / "config.yaml.d" / ".hidden.YML"),
        str(tmp_path / "config.yaml.d" / "10-a.yaml"),
        str(tmp_path / "config.yaml.d" / "20-b.yml"),
    ]
    assert resolved["node_name"] == "From-20"  # as written: only the hostname is lower-cased
    assert resolved["node_name_from"] == str(tmp_path / "config.yaml.d" / "20-b.yml")
    assert resolved["data_dir"] == "/srv/k3s"
    assert resolved["private_registry"] == "/srv/registries.yaml"


def test_flags_beat_the_config_and_the_config_beats_the_environment(tmp_path):
    config = tmp_path / "rke2.yaml"
    write(config, "node-name: from-config\n")
    env = {"RKE2_CONFIG_FILE": str(config), "RKE2_NODE_NAME": "from-env"}
    assert es.resolve("rke2", ["rke2", "server"], env, "h")["node_name"] == "from-config"
    flagged = es.resolve("rke2", ["rke2", "server", "--node-name", "from-flag"], env, "h")
    assert (flagged["node_name"], flagged["node_name_from"]) == ("from-flag", "the unit's command line")
    write(config, "token: x\n")
    from_env = es.resolve("rke2", ["rke2", "server"], env, "h")
    assert (from_env["node_name"], from_env["node_name_from"]) == (
        "from-env",
        "RKE2_NODE_NAME in the unit's environment",
    )


def test_with_node_id_and_list_appends(tmp_path):
    config = tmp_path / "config.yaml"
    write(config, "with-node-id: true\nnode-label: [a=1]\n")
    write(tmp_path / "config.yaml.d" / "x.yaml", "node-label+: [b=2]\n")
    assert es.resolve("k3s", ["k3s", "agent", "-c", str(config)], {}, "h")["with_node_id"] is True
    merged, _origin, problems = es.read_config(es.config_files(str(config)))
    assert merged["node-label"] == ["a=1", "b=2"] and problems == []


def test_unreadable_config_is_reported_not_guessed(tmp_path):
    config = tmp_path / "config.yaml"
    write(config, "node-name: [unclosed\n")
    resolved = es.resolve("k3s", ["k3s", "agent", "-c", str(config)], {}, "h")
    assert resolved["config_problems"] and str(config) in resolved["config_problems"][0]


def test_without_pyyaml_the_top_level_scalars_are_read():
    text = "# comment\nnode-name: 'n1' # trailing\nwith-node-id: false\nnode-label:\n  - a=1\ndata-dir: /srv\n"
    assert es.top_level_scalars(text) == {"node-name": "n1", "with-node-id": False, "data-dir": "/srv"}


def test_unit_command_lines_are_read_with_short_and_long_flags():
    flags = es.flags_of(["server", "-c", "/etc/x.yaml", "--node-name=n1", "-d", "/srv", "--with-node-id"])
    assert flags == {"config": "/etc/x.yaml", "node-name": "n1", "data-dir": "/srv", "with-node-id": True}


def test_the_admin_kubeconfig_is_where_the_server_writes_it(tmp_path):
    config = tmp_path / "config.yaml"
    default = es.resolve("rke2", ["/usr/local/bin/rke2", "server", "--config", str(config)], {}, "cp-1")
    assert default["write_kubeconfig"] == "/etc/rancher/rke2/rke2.yaml"
    by_env = es.resolve(
        "k3s", ["/usr/local/bin/k3s", "server", "--config", str(config)], {"K3S_KUBECONFIG_OUTPUT": "/root/k.yaml"}, "c"
    )
    assert (by_env["write_kubeconfig"], by_env["write_kubeconfig_from"]) == (
        "/root/k.yaml",
        "K3S_KUBECONFIG_OUTPUT in the unit's environment",
    )
    write(config, "write-kubeconfig: /srv/admin.yaml\n")
    assert (
        es.resolve("k3s", ["/usr/local/bin/k3s", "server", "--config", str(config)], {}, "c")["write_kubeconfig"]
        == "/srv/admin.yaml"
    )
    by_flag = es.resolve("k3s", ["/usr/local/bin/k3s", "server", "--config", str(config), "-o", "/tmp/o.yaml"], {}, "c")
    assert by_flag["write_kubeconfig"] == "/tmp/o.yaml"


# systemd 252's own output for `systemctl show --property=... k3s.service k3s-agent.service` on a k3s
# agent (lab host, Debian 12): one block per unit in the order asked, empty properties left out.
SHOW_OUTPUT = (
    "Environment=\nLoadState=not-found\nActiveState=inactive\nSubState=dead\n\n"
    "ExecStart={ path=/usr/local/bin/k3s ; argv[]=/usr/local/bin/k3s agent --node-name=w-1 ; ignore_errors=no ; "
    "start_time=[Wed 2026-12-02 08:07:22 UTC] ; stop_time=[n/a] ; pid=29 ; code=(null) ; status=0/0 }\n"
    "Environment=K3S_DATA_DIR=/srv/k3s\nEnvironmentFiles=/etc/systemd/system/k3s-agent.service.env (ignore_errors=yes)\n"
    "LoadState=loaded\nActiveState=active\nSubState=running\n"
)


class SystemctlHost:
    """A module on a host whose systemctl answers ``show`` with ``output``; it records the calls."""

    def __init__(self, output: str, rc: int = 0):
        self.output, self.rc, self.calls = output, rc, []

    def get_bin_path(self, name, opt_dirs=None):
        return "/usr/bin/systemctl" if name == "systemctl" else None

    def run_command(self, argv):
        self.calls.append(argv)
        return self.rc, self.output, ""


def test_one_systemctl_call_shows_every_unit_and_how_the_engine_is_started(tmp_path):
    host = SystemctlHost(SHOW_OUTPUT)
    units = ["k3s.service", "k3s-agent.service"]
    shown = systemd.show_units(host, units, ["LoadState", "ActiveState", "SubState", *es.INVOCATION_PROPERTIES])
    assert len(host.calls) == 1
    assert host.calls[0][:2] == ["/usr/bin/systemctl", "show"] and host.calls[0][3:] == units
    assert shown["k3s.service"]["LoadState"] == "not-found"
    assert systemd.unit_state(shown["k3s-agent.service"]) == "active"
    env_file = tmp_path / "k3s-agent.service.env"
    env_file.write_text("K3S_TOKEN='s3cret'\nexport K3S_URL=https://c1:6443\n")
    props = dict(shown["k3s-agent.service"])
    props["EnvironmentFiles"] = f"{env_file} (ignore_errors=yes)"
    argv, env = es.invocation(props)
    assert argv == ["/usr/local/bin/k3s", "agent", "--node-name=w-1"]
    assert env == {"K3S_TOKEN": "s3cret", "K3S_URL": "https://c1:6443", "K3S_DATA_DIR": "/srv/k3s"}


def test_a_systemctl_answer_that_cannot_be_matched_to_the_units_is_asked_again_unit_by_unit():
    # A failed call gives nothing; an answer whose blocks do not match the units asked is never matched
    # by guesswork: each unit is asked about alone.
    assert (
        systemd.show_units(SystemctlHost(SHOW_OUTPUT, rc=1), ["k3s.service", "k3s-agent.service"], ["LoadState"]) == {}
    )
    host = SystemctlHost("LoadState=loaded\nActiveState=active\nSubState=running\n")
    shown = systemd.show_units(host, ["k3s.service", "k3s-agent.service"], ["LoadState"])
    assert [call[3:] for call in host.calls] == [
        ["k3s.service", "k3s-agent.service"],
        ["k3s.service"],
        ["k3s-agent.service"],
    ]
    assert shown["k3s.service"]["LoadState"] == shown["k3s-agent.service"]["LoadState"] == "loaded"
    assert systemd.show_units(SystemctlHost(SHOW_OUTPUT), ["k3s.service"], ["LoadState"]) == {}
    assert es.invocation({}) == ([], {})
