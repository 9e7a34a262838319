"""lab-up clears what a crashed run left; lab-down leaves nothing behind."""

from __future__ import annotations

import subprocess

import labctl
import pytest

pytestmark = pytest.mark.lab


def plant_crash_leftovers() -> None:
    """What a lab killed half-way leaves: a namespace, a veth on the bridge, the bridge."""
    for cmd in (
        ["ip", "link", "add", labctl.BRIDGE, "type", "bridge"],
        ["ip", "netns", "add", f"{labctl.PREFIX}-crashed"],
        [
            "ip",
            "link",
            "add",
            f"{labctl.PREFIX}v-crashed",
            "type",
            "veth",
            "peer",
            "name",
            "x0",
            "netns",
            f"{labctl.PREFIX}-crashed",
        ],
        ["ip", "link", "set", f"{labctl.PREFIX}v-crashed", "master", labctl.BRIDGE],
    ):
        subprocess.run(cmd, check=True, capture_output=True)


def test_up_clears_a_crashed_run_and_down_leaves_no_trace(lab_manager):
    lab_manager.teardown()
    assert labctl.traces() == []
    plant_crash_leftovers()
    assert len(labctl.traces()) == 3

    running = lab_manager.get(hosts=2, controllers=1, engine="rke2")
    assert f"network namespace {labctl.PREFIX}-crashed" not in labctl.traces()
    assert set(running.hosts) == {"c1", "w1"}
    # Open an SSH session through ansible so that down also has ControlPersist masters to close.
    ping = subprocess.run(
        ["ansible", "-i", str(running.inventory), "all", "-m", "ansible.builtin.ping"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert ping.returncode == 0, ping.stdout
    present = labctl.traces()
    assert {f"container {labctl.PREFIX}-c1", f"container {labctl.PREFIX}-w1", f"link {labctl.BRIDGE}"} <= set(present)

    lab_manager.teardown()
    assert labctl.traces() == []
    for path in ("inventory.yml", "kubeconfig", "id_ed25519"):
        assert not (labctl.STATE / path).exists()


def test_rke2_hosts_use_the_rke2_names(lab_manager):
    running = lab_manager.get(hosts=2, controllers=1, engine="rke2", version="v1.29.7+rke2r1")
    assert running.sh("c1", "systemctl is-active rke2-server").stdout.strip() == "active"
    assert running.sh("w1", "systemctl is-active rke2-agent").stdout.strip() == "active"
    assert running.sh("c1", "rke2 --version", sudo=False).stdout.startswith("rke2 version v1.29.7+rke2r1 (")
    assert running.sh("c1", "test -x /usr/local/bin/rke2-killall.sh").returncode == 0
    assert "https://127.0.0.1:6443" in running.sh("c1", "cat /etc/rancher/rke2/rke2.yaml").stdout
    assert running.sh("c1", "test -d /var/lib/rancher/rke2/server/manifests").returncode == 0
    # RKE2 reads the audit policy from its own top-level key.
    audit = "/etc/rancher/rke2/audit-policy.yaml"
    running.sh(
        "c1",
        f"printf 'apiVersion: audit.k8s.io/v1\\nkind: Policy\\nrules: []\\n' > {audit} && "
        f"echo 'audit-policy-file: {audit}' >> /etc/rancher/rke2/config.yaml && "
        "systemctl restart rke2-server",
    )
    assert running.loaded("c1")["server_files"] == {"audit-policy": audit}
    running.wait_node("c1", "True")
    nodes = running.kubectl("get", "nodes").stdout
    assert "control-plane,etcd,master" in nodes
