"""Inventories as people already have them: other tools' group names set in group_vars, hosts named by IP
address (so inventory names are not node names), and inventories that select nothing."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from helpers import cargoship, desired_inventory, engine_files, wait_for

pytestmark = pytest.mark.lab

REPO = Path(__file__).resolve().parents[2]


# The engine's own registries.yaml schema, as its docs write it: a "*" mirror, an endpoint without a scheme
# (https), a configs entry with no settings, an identity token.
REGISTRIES = {
    "mirrors": {
        "*": {},
        "docker.io": {"endpoint": ["registry.internal.example:5000"]},
    },
    "configs": {
        "registry.internal.example:5000": None,
        "quay.io": {"auth": {"identity_token": "quay-token"}},
    },
}


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
    state.update(cargoship_controllers_group="server", cargoship_workers_group="agent", cargoship_registries=REGISTRIES)
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
    assert lab.loaded("w1")["registry_mirrors"] == ["*", "docker.io"]
    assert lab.loaded("w1")["registry_configs"] == ["quay.io", "registry.internal.example:5000"]
    assert not lab.core.read_node("w1").spec.unschedulable
    dropin = yaml.safe_load(lab.sh("c1", "cat /etc/rancher/k3s/config.yaml.d/90-cargoship.yaml").stdout)
    assert {"audit-log-maxage=30", "audit-log-maxbackup=10", "audit-log-maxsize=100"} <= set(
        dropin["kube-apiserver-arg+"]
    ), "k3s keeps rotated audit logs for ever unless told"
    # The same content written by hand, in another layout and key order: nothing to do.
    by_hand = (
        "# our mirrors\nconfigs:\n  quay.io: {auth: {identity_token: quay-token}}\n"
        "  'registry.internal.example:5000':\nmirrors:\n  docker.io:\n    endpoint: [registry.internal.example:5000]\n"
        "  '*': {}\n"
    )
    lab.sh("w2", f"printf '%s' \"{by_hand}\" > /etc/rancher/k3s/registries.yaml")
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


def test_group_names_given_as_extra_vars_work_through_the_command_and_ansible_playbook(lab, tmp_path):
    inventory = k3s_playbook_style(lab, tmp_path)
    group_vars = tmp_path / "group_vars" / "k3s_cluster.yml"
    state = yaml.safe_load(group_vars.read_text())
    del state["cargoship_controllers_group"], state["cargoship_workers_group"]
    group_vars.write_text(yaml.safe_dump(state))
    groups = ["-e", "cargoship_controllers_group=server", "-e", "cargoship_workers_group=agent"]
    report = tmp_path / "dry.json"
    dry = cargoship("engine-config-sync", "-i", str(inventory), "--dry-run", "--report-json", str(report), *groups)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    sync = {p["name"]: p for p in json.loads(report.read_text())["phases"]}
    assert list(sync["sync_controller"]["hosts"]) == [address_of(lab, "c1")]
    assert sorted(sync["sync_worker"]["hosts"]) == sorted(address_of(lab, n) for n in ("w1", "w2"))
    direct = subprocess.run(
        ["ansible-playbook", "-i", str(inventory), "cargoship.engine.engine_config_sync", "--check", *groups],
        capture_output=True,
        text=True,
        check=False,
    )
    assert direct.returncode == 0, direct.stdout + direct.stderr


def test_hosts_that_are_no_node_or_the_same_node_stop_the_run_before_anything(lab, tmp_path):
    inventory = k3s_playbook_style(lab, tmp_path)
    w1, w2 = address_of(lab, "w1"), address_of(lab, "w2")
    dropin = "/etc/rancher/k3s/config.yaml.d/50-name.yaml"
    lab.sh("w2", "mkdir -p /etc/rancher/k3s/config.yaml.d")
    try:
        # w2's engine would register as "ghost" (its config says so), a node the cluster does not have.
        lab.sh("w2", f"echo 'node-name: ghost' > {dropin}")
        before = {name: (engine_files(lab, name), lab.starts(name)) for name in lab.hosts}
        result = cargoship("engine-config-sync", "-i", str(inventory), "--confirm")
        output = result.stdout + result.stderr
        assert result.returncode == 1, output
        assert f"{w2}: the cluster has no node ghost (its engine's node name)" in output
        assert {name: (engine_files(lab, name), lab.starts(name)) for name in lab.hosts} == before
        assert lab.sh("c1", "test -e /var/lib/cargoship/lock.json", check=False).returncode == 1, "lock left"
        # Two hosts that are one node.
        lab.sh("w2", f"echo 'node-name: w1' > {dropin}")
        result = cargoship("engine-config-sync", "-i", str(inventory), "--dry-run")
        assert result.returncode == 1, result.stdout + result.stderr
        assert f"{w1} and {w2} are all node w1" in result.stdout + result.stderr
    finally:
        lab.sh("w2", f"rm -f {dropin}")


def test_removing_a_setting_removes_exactly_what_cargoship_wrote_for_it(lab, tmp_path):
    full = desired_inventory(lab, tmp_path / "full")
    converged = cargoship("engine-config-sync", "-i", str(full), "--confirm")
    assert converged.returncode == 0, converged.stdout + converged.stderr
    server = "/var/lib/rancher/k3s/server"
    chart_file = f"{server}/manifests/cargoship-traefik.yaml"
    wait_for(lambda: "traefik" in chart_configs(lab), "the chart values to be applied", 30)

    # The desired state not loaded at all (the hosts file passed from elsewhere, its group_vars/ unread):
    # nothing is removed or restarted, and the dry run says per host what it keeps.
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(full / "hosts.yml", bare / "hosts.yml")
    starts = {name: lab.starts(name) for name in lab.hosts}
    listing = "ls -lR --time-style=+%s.%N /etc/rancher/k3s /var/lib/rancher/k3s/server"
    files = {name: lab.sh(name, listing, check=False).stdout for name in lab.hosts}
    dry = cargoship("engine-config-sync", "-i", str(bare / "hosts.yml"), "--dry-run", "--detailed-exitcode")
    assert dry.returncode == 0, dry.stdout + dry.stderr
    kept = "registries: not in this inventory; /etc/rancher/k3s/registries.yaml written by cargoship is kept"
    assert all(f"{name}: {kept} (set cargoship_registries: absent" in dry.stdout for name in lab.hosts), dry.stdout
    assert f"c1: audit policy: not in this inventory; {server}/cargoship-audit-policy.yaml" in dry.stdout
    assert f"c1: chart values: not in this inventory; {chart_file}" in dry.stdout
    real = cargoship("engine-config-sync", "-i", str(bare / "hosts.yml"), "--confirm")
    assert real.returncode == 0, real.stdout + real.stderr
    assert {name: lab.starts(name) - starts[name] for name in lab.hosts} == {"c1": 0, "w1": 0, "w2": 0}
    assert {name: lab.sh(name, listing, check=False).stdout for name in lab.hosts} == files  # names, sizes, mtimes
    assert "traefik" in chart_configs(lab), "chart values the inventory does not name are not deleted"

    # No audit policy and no chart values any more: the controller restarts once, the workers not at all.
    starts = {name: lab.starts(name) for name in lab.hosts}
    without_audit = desired_inventory(
        lab, tmp_path / "a", cargoship_audit_policy="absent", cargoship_chart_values="absent"
    )
    result = cargoship("engine-config-sync", "-i", str(without_audit), "--confirm")
    assert result.returncode == 0, result.stdout + result.stderr
    assert {name: lab.starts(name) - starts[name] for name in lab.hosts} == {"c1": 1, "w1": 0, "w2": 0}
    assert lab.loaded("c1")["server_files"] == {"pod-security": f"{server}/cargoship-pod-security.yaml"}
    assert lab.sh("c1", f"test -e {server}/cargoship-audit-policy.yaml", check=False).returncode == 1
    dropin = yaml.safe_load(lab.sh("c1", "cat /etc/rancher/k3s/config.yaml.d/90-cargoship.yaml").stdout)
    assert dropin == {"kube-apiserver-arg+": [f"admission-control-config-file={server}/cargoship-pod-security.yaml"]}
    assert lab.sh("c1", f"test -e {chart_file}", check=False).returncode == 1
    assert "traefik" not in chart_configs(lab), "the engine deletes nothing when its manifest goes: cargoship must"
    addons = lab.custom.list_namespaced_custom_object("k3s.cattle.io", "v1", "kube-system", "addons")["items"]
    assert "cargoship-traefik" not in [a["metadata"]["name"] for a in addons]

    # Nothing from cargoship at all, and a registries.yaml on w2 that someone else wrote: that one stays.
    by_hand = "mirrors:\n  quay.io:\n    endpoint: [https://quay-mirror.example]\n"
    lab.sh("w2", f"printf '%s' '{by_hand}' > /etc/rancher/k3s/registries.yaml")
    starts = {name: lab.starts(name) for name in lab.hosts}
    nothing = desired_inventory(
        lab,
        tmp_path / "b",
        cargoship_audit_policy="absent",
        cargoship_chart_values="absent",
        cargoship_pod_security="absent",
        cargoship_registries="absent",
    )
    result = cargoship("engine-config-sync", "-i", str(nothing), "--confirm")
    assert result.returncode == 0, result.stdout + result.stderr
    assert {name: lab.starts(name) - starts[name] for name in lab.hosts} == {"c1": 1, "w1": 1, "w2": 0}
    for name in ("c1", "w1"):
        assert lab.sh(name, "test -e /etc/rancher/k3s/registries.yaml", check=False).returncode == 1
    assert lab.sh("w2", "cat /etc/rancher/k3s/registries.yaml").stdout == by_hand
    assert lab.sh("c1", "ls /etc/rancher/k3s/config.yaml.d/ 2>/dev/null").stdout.strip() == ""
    assert lab.loaded("c1")["server_files"] == {}
    again = cargoship("engine-config-sync", "-i", str(nothing), "--dry-run", "--detailed-exitcode")
    assert again.returncode == 0, again.stdout + again.stderr
    # No convergence back to the full state here: the next test that asks for a lab gets a fresh one,
    # since this one is no longer as it was built (tests/lab/labhosts.py, the lab's fingerprint).


def chart_configs(lab) -> list[str]:
    found = lab.custom.list_namespaced_custom_object("helm.cattle.io", "v1", "kube-system", "helmchartconfigs")
    return [item["metadata"]["name"] for item in found["items"]]


def test_the_engines_own_paths_are_where_cargoship_writes(lab, tmp_path):
    """A worker whose unit points the engine at another config file (with its own private-registry), and a
    controller with another data-dir: the engine's files go where the engine reads them."""
    unit_dropin = "/etc/systemd/system/k3s-agent.service.d/10-config.conf"
    data_dropin = "/etc/rancher/k3s/config.yaml.d/05-data-dir.yaml"
    lab.sh(
        "w1",
        "mkdir -p /srv/k3s /etc/systemd/system/k3s-agent.service.d"
        " && cp /etc/rancher/k3s/config.yaml /srv/k3s/config.yaml"
        " && echo 'private-registry: /srv/k3s/registries.yaml' >> /srv/k3s/config.yaml"
        f" && printf '[Service]\\nEnvironment=K3S_CONFIG_FILE=/srv/k3s/config.yaml\\n' > {unit_dropin}"
        " && systemctl daemon-reload && systemctl restart k3s-agent",
    )
    lab.sh(
        "c1",
        f"mkdir -p /srv/k3s-data /etc/rancher/k3s/config.yaml.d && echo 'data-dir: /srv/k3s-data' > {data_dropin} && systemctl restart k3s",
    )
    full = desired_inventory(lab, tmp_path / "full")
    try:
        result = cargoship("engine-config-sync", "-i", str(full), "--confirm")
        assert result.returncode == 0, result.stdout + result.stderr
        assert lab.loaded("w1")["files"].get("/srv/k3s/registries.yaml"), "the registries file the engine reads"
        assert lab.loaded("w1")["registry_mirrors"] == ["docker.io"]
        assert lab.loaded("c1")["server_files"] == {
            "audit-policy": "/srv/k3s-data/server/cargoship-audit-policy.yaml",
            "pod-security": "/srv/k3s-data/server/cargoship-pod-security.yaml",
        }
        assert (
            lab.sh("c1", "test -s /srv/k3s-data/server/manifests/cargoship-traefik.yaml", check=False).returncode == 0
        )
        again = cargoship("engine-config-sync", "-i", str(full), "--dry-run", "--detailed-exitcode")
        assert again.returncode == 0, again.stdout + again.stderr
    finally:
        lab.sh("w1", f"rm -rf {unit_dropin} /srv/k3s && systemctl daemon-reload && systemctl restart k3s-agent")
        # cargoship's drop-in now names files under /srv/k3s-data: without them the engine would not start
        # (as a real one would not). The lab is not as built (cargoship's files are in it): the next test
        # gets a new one, so no run puts the files back here.
        lab.sh(
            "c1",
            f"rm -f {data_dropin} /etc/rancher/k3s/config.yaml.d/90-cargoship.yaml && systemctl restart k3s"
            " && rm -rf /srv/k3s-data",
        )
