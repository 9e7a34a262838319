"""Inventories as people already have them: other tools' group names set in group_vars, hosts named by IP
address (so inventory names are not node names), and inventories that select nothing."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml
from helpers import cargoship

pytestmark = pytest.mark.lab

REPO = Path(__file__).resolve().parents[2]


def k3s_playbook_style(lab, directory: Path) -> Path:
    """Laid out like the most common k3s playbooks' sample: k3s_cluster with children server and agent,
    hosts named by IP address; cargoship's group names and the desired state in group_vars."""
    lab_vars = yaml.safe_load(lab.inventory.read_text())["all"]["vars"]
    by_role = {"server": [], "agent": []}
    for host in json.loads((lab.state / "lab.json").read_text())["hosts"]:
        by_role[host["role"]].append(host["address"])
    inventory = {
        "k3s_cluster": {
            "children": {
                "server": {"hosts": {address: None for address in by_role["server"]}},
                "agent": {"hosts": {address: None for address in by_role["agent"]}},
            },
            "vars": lab_vars,
        }
    }
    (directory / "group_vars").mkdir(parents=True, exist_ok=True)
    (directory / "hosts.yml").write_text(yaml.safe_dump(inventory))
    state = yaml.safe_load((REPO / "examples" / "group_vars" / "all.yml").read_text())
    state.update(cargoship_controllers_group="server", cargoship_workers_group="agent")
    (directory / "group_vars" / "k3s_cluster.yml").write_text(yaml.safe_dump(state))
    return directory / "hosts.yml"


def address_of(lab, name: str) -> str:
    return next(h["address"] for h in json.loads((lab.state / "lab.json").read_text())["hosts"] if h["name"] == name)


def test_a_k3s_playbook_inventory_with_hosts_named_by_address_converges(lab, tmp_path):
    inventory = k3s_playbook_style(lab, tmp_path)
    w1 = address_of(lab, "w1")
    lab.sh("w1", "sed -i 's/registry.internal.example/drifted.example/' /etc/rancher/k3s/registries.yaml", check=False)
    report = tmp_path / "dry.json"
    dry = cargoship(
        "engine-config-sync", "-i", str(inventory), "--dry-run", "--detailed-exitcode", "--report-json", str(report)
    )
    assert dry.returncode == 2, dry.stdout + dry.stderr
    plan = json.loads(report.read_text())
    # The report names each host's node where the two differ.
    assert plan["nodes"] == {address_of(lab, name): name for name in lab.hosts}
    sync = next(p for p in plan["phases"] if p["name"] == "sync_worker")
    assert sync["hosts"][w1]["node"] == "w1" and "cordon" in sync["hosts"][w1]["changes"]
    real = cargoship("engine-config-sync", "-i", str(inventory), "--confirm")
    assert real.returncode == 0, real.stdout + real.stderr
    assert lab.loaded("w1")["registry_mirrors"] == ["docker.io"]
    assert not lab.core.read_node("w1").spec.unschedulable
    again = cargoship("engine-config-sync", "-i", str(inventory), "--dry-run", "--detailed-exitcode")
    assert again.returncode == 0, again.stdout + again.stderr
    # The collection's playbook reads the same group_vars without the command.
    direct = subprocess.run(
        ["ansible-playbook", "-i", str(inventory), "cargoship.engine.engine_config_sync", "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert direct.returncode == 0, direct.stdout + direct.stderr
    assert f"ok: [{w1}]" in direct.stdout


@pytest.mark.parametrize(
    ("layout", "message"),
    [
        ("empty", "no host to work on: the inventory has no hosts"),
        ("no-groups", "no inventory host is in the controllers group 'controllers' or workers group 'workers'"),
        ("limit-outside", "no host to work on: the hosts selected (bastion) include no host of the"),
    ],
)
def test_an_inventory_that_selects_no_node_is_an_error(lab, tmp_path, layout, message):
    lab_vars = yaml.safe_load(lab.inventory.read_text())["all"]["vars"]
    hosts = {"c1": {"ansible_host": address_of(lab, "c1")}}
    inventory = {
        "empty": {"all": {"hosts": {}}},
        "no-groups": {"all": {"hosts": hosts, "vars": lab_vars}},
        "limit-outside": {
            "all": {
                "vars": lab_vars,
                "children": {"controllers": {"hosts": hosts}, "bastions": {"hosts": {"bastion": None}}},
            }
        },
    }[layout]
    path = tmp_path / "hosts.yml"
    path.write_text(yaml.safe_dump(inventory))
    limit = ["--limit", "bastion"] if layout == "limit-outside" else []
    result = cargoship("engine-config-sync", "-i", str(path), "--dry-run", "--detailed-exitcode", *limit)
    assert result.returncode == 1, result.stdout + result.stderr
    assert message in result.stdout + result.stderr


def test_hosts_that_are_no_node_or_the_same_node_stop_the_run_before_anything(lab, tmp_path):
    inventory = k3s_playbook_style(lab, tmp_path)
    document = yaml.safe_load(inventory.read_text())
    # The same machine twice: by its address and by its name.
    document["k3s_cluster"]["children"]["agent"]["hosts"]["w1"] = {"ansible_host": address_of(lab, "w1")}
    inventory.write_text(yaml.safe_dump(document))
    dropin = "/etc/rancher/k3s/config.yaml.d/50-name.yaml"
    lab.sh("w2", f"mkdir -p /etc/rancher/k3s/config.yaml.d && echo 'node-name: ghost' > {dropin}")
    try:
        result = cargoship("engine-config-sync", "-i", str(inventory), "--confirm")
        output = result.stdout + result.stderr
        assert result.returncode == 1, output
        assert f"{address_of(lab, 'w1')} and w1 are all node w1" in output
        assert f"{address_of(lab, 'w2')}: the cluster has no node ghost (its engine's node name)" in output
        assert lab.sh("c1", "test -e /var/lib/cargoship/lock.json", check=False).returncode == 1, "lock left"
    finally:
        lab.sh("w2", f"rm -f {dropin}")
