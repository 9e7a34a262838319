"""When a node fails during the sync, nothing is lost: it gets its previous config back, runs, is
uncordoned, and the rollout stops before the next node."""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path

import pytest
from helpers import budget_refusing_every_eviction, cargoship, desired_inventory, engine_files

pytestmark = pytest.mark.lab

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def fleet(lab_manager):
    """Two controllers and a worker, converged to the example desired state."""
    lab = lab_manager.get(hosts=3, controllers=2, engine="k3s", fresh=True)
    (lab.state / "group_vars").mkdir(exist_ok=True)
    shutil.copy(REPO / "examples" / "group_vars" / "all.yml", lab.state / "group_vars" / "all.yml")
    converged = cargoship("engine-config-sync", "-i", str(lab.inventory), "--confirm")
    assert converged.returncode == 0, converged.stdout + converged.stderr
    return lab


def test_engine_refusing_new_config_is_rolled_back_and_the_rollout_stops(fleet, tmp_path):
    broken_policy = {
        "apiVersion": "audit.k8s.io/v1",
        "kind": "Policy",
        # Well-formed to cargoship (its levels and stages are valid), refused by kube-apiserver at start.
        "rules": [{"level": "Metadata", "resources": [{"group": ""}], "nonResourceURLs": ["/healthz"]}],
    }
    # k3s exits on it and systemd restarts it every 5 s for ever: the start fails at the service timeout,
    # 20 s here instead of the default 300 s.
    inventory = desired_inventory(
        fleet, tmp_path / "inventory", cargoship_audit_policy=broken_policy, cargoship_service_timeout=20
    )
    before = {name: (engine_files(fleet, name), fleet.starts(name)) for name in fleet.hosts}

    result = cargoship(
        "engine-config-sync", "-i", str(inventory), "--confirm", "--report-json", str(tmp_path / "r.json")
    )

    assert result.returncode == 1, result.stdout + result.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    sync = next(p for p in report["phases"] if p["name"] == "sync_controller")
    assert sync["status"] == "failed"
    message = " ".join(sync["hosts"]["c1"]["messages"])
    assert "Previous configuration restored" in message and "The rollout stopped before the next node" in message
    # c1: previous files back, engine running on them, Ready, schedulable.
    assert engine_files(fleet, "c1") == before["c1"][0]
    assert fleet.sh("c1", "systemctl is-active k3s").stdout.strip() == "active"
    assert fleet.node_ready("c1") == "True"
    assert not fleet.core.read_node("c1").spec.unschedulable
    assert fleet.sh("c1", "test -e /var/lib/rancher/k3s/server/.cargoship-*", check=False).returncode != 0
    # Nobody after c1 was touched, and no lock was left behind.
    for name in ("c2", "w1"):
        assert (engine_files(fleet, name), fleet.starts(name)) == before[name], f"{name} was touched"
    for name in fleet.hosts:
        assert fleet.sh(name, "test -e /var/lib/cargoship/lock.json", check=False).returncode == 1


def test_drain_blocked_by_a_budget_is_bounded_and_leaves_the_node_as_it_was(fleet, tmp_path):
    inventory = desired_inventory(fleet, tmp_path / "inventory", cargoship_drain_timeout=6)
    fleet.sh("w1", "sed -i 's/registry.internal.example/elsewhere.example/' /etc/rancher/k3s/registries.yaml")
    drifted = engine_files(fleet, "w1")
    starts = fleet.starts("w1")
    with budget_refusing_every_eviction(fleet, holding=("w1",)):
        result = cargoship("engine-config-sync", "-i", str(inventory), "--confirm")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "did not finish within 6s" in result.stdout + result.stderr
    assert "a PodDisruptionBudget does not allow it yet" in result.stdout + result.stderr
    assert not fleet.core.read_node("w1").spec.unschedulable, "w1 left cordoned"
    assert fleet.starts("w1") == starts, "the engine must not restart when the drain failed"
    assert engine_files(fleet, "w1") == drifted, "nothing may be written when the drain failed"
    # Once the budget allows it, a re-run completes.
    assert cargoship("engine-config-sync", "-i", str(inventory), "--confirm").returncode == 0
    assert fleet.starts("w1") == starts + 1


def test_a_rerun_reaches_the_api_through_another_controller_while_the_kubeconfigs_is_down(fleet):
    """The breach the soak found (seed soak-20261207-1, rollout 1): a run killed (SIGKILL) while c1, the server
    the operator's kubeconfig names (real-engines.md: one server, or a load balancer), was stopped for its
    restart; the documented recovery, a rerun, could not reach the API ("cannot reach the Kubernetes API ...
    Connection refused") and so could never start c1 again. The API calls now turn to the other controllers'
    API servers (their inventory addresses, the kubeconfig's port, CA and token) while c1's does not answer."""
    inventory = str(fleet.inventory)
    # What a run lost between stopping c1's engine and starting it again leaves.
    fleet.kubectl("cordon", "c1")
    fleet.kubectl("annotate", "node", "c1", "cargoship.io/cordoned-by=20261207T000000Z-0ld0ne")
    fleet.sh("c1", "systemctl stop k3s")
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((fleet.hosts["c1"].address, 6443), timeout=5).close()
    result = cargoship("engine-config-sync", "-i", inventory, "--confirm")
    assert result.returncode == 0, result.stdout + result.stderr
    assert fleet.sh("c1", "systemctl is-active k3s").stdout.strip() == "active"
    assert fleet.node_ready("c1") == "True"
    node = fleet.core.read_node("c1")
    assert not node.spec.unschedulable and "cargoship.io/cordoned-by" not in (node.metadata.annotations or {})
    again = cargoship("engine-config-sync", "-i", inventory, "--dry-run", "--detailed-exitcode")
    assert again.returncode == 0, again.stdout + again.stderr
