"""The cargoship command's options and exit codes, and the playbook imported from a site playbook."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import labctl
import pytest
import yaml
from helpers import cargoship, desired_inventory

pytestmark = pytest.mark.lab

REPO = Path(__file__).resolve().parents[2]
CANARY = "vaulted-canary-9f3a"


@pytest.fixture(scope="module")
def fleet(lab_manager):
    """A controller (c1) and a worker (w1): no test here needs a second worker, and each run on a host fewer
    costs about a quarter less (docs/testing.md)."""
    return lab_manager.get(hosts=2, controllers=1, engine="k3s", fresh=True)


def test_unreachable_host_fails_before_anything_is_locked_and_is_named(fleet, tmp_path):
    inventory = desired_inventory(fleet, tmp_path / "inv")
    hosts = yaml.safe_load((inventory / "hosts.yml").read_text())
    nobody = str(labctl.SUBNET.network_address + 250)  # in the lab's subnet, no host there
    hosts["all"]["children"]["workers"]["hosts"]["w9"] = {"ansible_host": nobody, "ansible_ssh_timeout": 3}
    (inventory / "hosts.yml").write_text(yaml.safe_dump(hosts))
    result = cargoship("engine-config-sync", "-i", str(inventory), "--confirm")
    assert result.returncode == 3, result.stdout + result.stderr
    assert "unreachable: w9" in result.stderr
    for name in fleet.hosts:
        assert fleet.sh(name, "test -e /var/lib/cargoship/lock.json", check=False).returncode == 1
        assert fleet.sh(name, "test -e /etc/rancher/k3s/registries.yaml", check=False).returncode == 1


def test_a_host_whose_clock_is_off_by_more_than_allowed_stops_the_run_before_anything(fleet, tmp_path):
    """w1's wall clock 45 s ahead (the lab's clock-skew library; cargoship allows 30 s): the real run stops at
    its host checks, naming the host and the difference, before any lock or file."""
    inventory = desired_inventory(fleet, tmp_path / "inv")
    with fleet.clock_off("w1", 45):
        result = cargoship("engine-config-sync", "-i", str(inventory), "--confirm")
    assert result.returncode == 1, result.stdout + result.stderr
    found = re.search(r"w1: clock differs from the control host's by (\d+)s \(allowed 30s\)", result.stderr)
    # Never more than the clock is off: the time the call took is not counted (CI once said 48 s for 45).
    assert found and 30 < int(found.group(1)) <= 45, result.stdout + result.stderr
    for name in fleet.hosts:
        assert fleet.sh(name, "test -e /var/lib/cargoship/lock.json", check=False).returncode == 1
        assert fleet.sh(name, "test -e /etc/rancher/k3s/registries.yaml", check=False).returncode == 1


def test_host_keys_are_checked_an_unknown_host_key_stops_the_run(fleet, tmp_path):
    inventory = desired_inventory(fleet, tmp_path / "inv")
    hosts = yaml.safe_load((inventory / "hosts.yml").read_text())
    # The hosts' keys unknown, and nothing in the inventory about checking them: the defaults apply. No
    # shared connection either: an SSH master the earlier tests left open would skip the key check.
    (tmp_path / "known_hosts").write_text("")
    hosts["all"]["vars"]["ansible_ssh_common_args"] = (
        f"-o UserKnownHostsFile={tmp_path / 'known_hosts'} -o ControlPath=none"
    )
    (inventory / "hosts.yml").write_text(yaml.safe_dump(hosts))
    result = cargoship("engine-config-sync", "-i", str(inventory), "--dry-run")
    assert result.returncode == 3, result.stdout + result.stderr
    assert "Host key verification failed" in result.stdout + result.stderr
    assert (tmp_path / "known_hosts").read_text() == "", "a host key was accepted without checking"


def test_limit_touches_only_the_hosts_named(fleet, tmp_path):
    inventory = desired_inventory(fleet, tmp_path / "inv")
    starts = {name: fleet.starts(name) for name in fleet.hosts}
    result = cargoship("engine-config-sync", "-i", str(inventory), "--confirm", "--limit", "w1")
    assert result.returncode == 0, result.stdout + result.stderr
    assert {name: fleet.starts(name) - starts[name] for name in fleet.hosts} == {"c1": 0, "w1": 1}


def test_vaulted_registry_password_reaches_the_host_and_nowhere_else(fleet, tmp_path):
    password_file = tmp_path / "vault-pass"
    password_file.write_text("correct horse battery staple\n")
    vaulted = subprocess.run(
        ["ansible-vault", "encrypt_string", "--vault-password-file", str(password_file), CANARY, "--name", "password"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    inventory = desired_inventory(fleet, tmp_path / "inv")
    state = (inventory / "group_vars" / "all.yml").read_text()
    plain = "password: demo-registry-password-c4n4ry"
    assert plain in state
    (inventory / "group_vars" / "all.yml").write_text(state.replace(plain, vaulted.strip().replace("\n", "\n        ")))

    # The runs' temporary directories go here, where no other test's (a parallel worker's) go.
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    private = {"TMPDIR": str(scratch)}
    missing = cargoship("engine-config-sync", "-i", str(inventory), "--dry-run", env=private)
    assert missing.returncode != 0
    assert "give their password with --ask-vault-pass" in missing.stderr, missing.stdout + missing.stderr
    dry = cargoship(
        "engine-config-sync",
        "-i",
        str(inventory),
        "--dry-run",
        "-vvvv",
        "--vault-password-file",
        str(password_file),
        "--report-json",
        str(tmp_path / "r.json"),
        env=private,
    )
    assert dry.returncode == 0, dry.stdout + dry.stderr
    real = cargoship(
        "engine-config-sync",
        "-i",
        str(inventory),
        "--confirm",
        "-vvvv",
        "--vault-password-file",
        str(password_file),
        env=private,
    )
    assert real.returncode == 0, real.stdout + real.stderr
    for text in (dry.stdout, dry.stderr, real.stdout, real.stderr, (tmp_path / "r.json").read_text()):
        assert CANARY not in text
    assert CANARY in fleet.sh("w1", "cat /etc/rancher/k3s/registries.yaml").stdout
    # The command leaves no ansible-runner artifacts behind that could hold it.
    assert list(scratch.glob("cargoship-run-*")) == []


def test_label_nodes_sets_the_profile_label_once(fleet, tmp_path):
    inventory = desired_inventory(fleet, tmp_path / "inv")
    (inventory / "group_vars" / "workers.yml").write_text("cargoship_profile: infrastructure\n")
    dry = cargoship(
        "engine-config-sync",
        "-i",
        str(inventory),
        "--dry-run",
        "--label-nodes",
        "--report-json",
        str(tmp_path / "d.json"),
    )
    assert dry.returncode == 0, dry.stderr
    labels = next(p for p in json.loads((tmp_path / "d.json").read_text())["phases"] if p["name"] == "label_nodes")
    assert labels["status"] == "would run"
    assert labels["hosts"]["w1"]["changes"] == ["label node-role.kubernetes.io/infrastructure=true"]
    assert "node-role.kubernetes.io/infrastructure" not in fleet.core.read_node("w1").metadata.labels
    real = cargoship(
        "engine-config-sync",
        "-i",
        str(inventory),
        "--confirm",
        "--label-nodes",
        "--report-json",
        str(tmp_path / "r.json"),
    )
    assert real.returncode == 0, real.stderr
    for name in fleet.workers:
        assert fleet.core.read_node(name).metadata.labels["node-role.kubernetes.io/infrastructure"] == "true"
    assert "node-role.kubernetes.io/infrastructure" not in fleet.core.read_node("c1").metadata.labels
    again = cargoship(
        "engine-config-sync",
        "-i",
        str(inventory),
        "--dry-run",
        "--label-nodes",
        "--report-json",
        str(tmp_path / "a.json"),
    )
    assert again.returncode == 0
    labels = next(p for p in json.loads((tmp_path / "a.json").read_text())["phases"] if p["name"] == "label_nodes")
    assert labels["status"] == "nothing to do"


def test_import_playbook_from_a_site_playbook_gives_the_same_report(fleet, tmp_path):
    inventory = desired_inventory(fleet, tmp_path / "inv")
    site = tmp_path / "site.yml"
    site.write_text(
        "- name: Engine configuration\n  ansible.builtin.import_playbook: cargoship.engine.engine_config_sync\n"
    )
    cli = cargoship(
        "engine-config-sync", "-i", str(inventory), "--dry-run", "--report-json", str(tmp_path / "cli.json")
    )
    assert cli.returncode == 0, cli.stderr
    imported = subprocess.run(
        ["ansible-playbook", "-i", str(inventory), str(site), "--check"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, "CARGOSHIP_REPORT_JSON": str(tmp_path / "site.json")},
    )
    assert imported.returncode == 0, imported.stdout[-3000:]
    site_report, cli_report = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("site", "cli"))
    assert site_report.pop("run_id") and cli_report.pop("run_id")  # each run has its own
    assert site_report == cli_report

    # Converged through the site playbook, a second run changes nothing on any host: through ansible-playbook
    # (what molecule's idempotence step and Ansible users read) and through the command (-v shows the recap).
    def recap(text: str) -> dict:
        return dict(re.findall(r"^(\S+)\s+: ok=\d+\s+changed=(\d+)", text, re.MULTILINE))

    site_env = {**os.environ, "CARGOSHIP_REPORT_JSON": str(tmp_path / "real.json")}
    for attempt in ("converge", "again"):  # the recap of the second is read below
        real = subprocess.run(
            ["ansible-playbook", "-i", str(inventory), str(site)],
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
            env=site_env,
        )
        assert real.returncode == 0, attempt + ": " + real.stdout[-3000:]
    assert recap(real.stdout) and set(recap(real.stdout).values()) == {"0"}, real.stdout[-3000:]
    command = cargoship("engine-config-sync", "-i", str(inventory), "--confirm", "-v")
    assert command.returncode == 0, command.stdout[-3000:] + command.stderr
    assert recap(command.stdout) and set(recap(command.stdout).values()) == {"0"}, command.stdout[-3000:]


def test_unlock_breaks_a_lock_whoever_holds_it(fleet, tmp_path):
    fleet.sh("c1", 'mkdir -p /var/lib/cargoship && echo \'{"run_id": "stuck"}\' > /var/lib/cargoship/lock.json')
    asked = cargoship("unlock", "-i", str(fleet.inventory))
    assert asked.returncode == 64, "without a terminal to ask on, unlock needs --yes"
    assert "pass --yes" in asked.stderr
    assert fleet.sh("c1", "test -e /var/lib/cargoship/lock.json", check=False).returncode == 0
    result = cargoship("unlock", "-i", str(fleet.inventory), "--yes")
    assert result.returncode == 0, result.stdout + result.stderr
    assert fleet.sh("c1", "test -e /var/lib/cargoship/lock.json", check=False).returncode == 1


def test_ask_become_pass_answers_sudo_that_wants_a_password(fleet, tmp_path):
    """-K as in ansible-playbook: asked once on the terminal, before anything runs, and given to every sudo."""
    import labctl
    import pexpect

    password = "lab-sudo-pass-7c1"
    rule = {True: "NOPASSWD:ALL", False: "ALL"}
    for name in fleet.hosts:
        container = fleet.hosts[name].container
        labctl.podman("exec", container, "sh", "-c", f"echo '{labctl.SSH_USER}:{password}' | chpasswd")
        labctl.podman(
            "exec",
            container,
            "sh",
            "-c",
            f"echo '{labctl.SSH_USER} ALL=(ALL) {rule[False]}' > /etc/sudoers.d/{labctl.SSH_USER}",
        )
    try:
        without = cargoship("engine-config-sync", "-i", str(fleet.inventory), "--dry-run")
        assert without.returncode != 0 and "password" in (without.stdout + without.stderr).lower()
        child = pexpect.spawn(
            "cargoship",
            ["engine-config-sync", "-i", str(fleet.inventory), "--dry-run", "-K", "--output", "plain"],
            encoding="utf-8",
            timeout=300,
        )
        child.expect("BECOME password")
        child.sendline(password)
        child.expect(pexpect.EOF)
        child.close()
        assert child.exitstatus == 0, child.before
        assert password not in child.before.split("BECOME password", 1)[-1]
    finally:
        for name in fleet.hosts:
            labctl.podman(
                "exec",
                fleet.hosts[name].container,
                "sh",
                "-c",
                f"echo '{labctl.SSH_USER} ALL=(ALL) {rule[True]}' > /etc/sudoers.d/{labctl.SSH_USER}",
            )
