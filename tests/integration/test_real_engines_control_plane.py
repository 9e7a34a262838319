"""The rollout against engines as unkind as the real ones (../shared/notes/real-engines.md), on control planes
of more than one server and on RKE2: a controller is stopped only while the cluster can lose it; an RKE2
server that never signals ready; RKE2's apiserver proven by its FILE_HASH. The k3s fleet's tests are in
test_real_engines.py (a module per lab shape family, so that pytest's workers share the load)."""

from __future__ import annotations

import copy
import hashlib
import json
import subprocess

import pytest
from helpers import (
    EXAMPLE,
    KUBELET_DOWN,
    cargoship,
    converged_lab,
    desired_inventory,
    drift,
    engine_files,
    proven_lines,
    run_keeping_previous,
    stamp_of,
    wait_for,
)

pytestmark = pytest.mark.lab
# The tests run in this file's order, grouped by lab shape: two controllers', then RKE2's.


@pytest.fixture(scope="module")
def two_controllers(lab_manager, tmp_path_factory):
    return converged_lab(lab_manager, tmp_path_factory.mktemp("two"), hosts=3, controllers=2, engine="k3s")


def assert_untouched(lab, name: str, before: tuple) -> None:
    assert (engine_files(lab, name), lab.starts(name)) == before, f"{name} was touched"
    assert not lab.core.read_node(name).spec.unschedulable, f"{name} was cordoned"


def test_a_controller_is_not_stopped_while_another_is_down_or_shows_only_a_stale_ready(two_controllers):
    lab, inventory = two_controllers
    drift(lab, "c1")
    before = (engine_files(lab, "c1"), lab.starts("c1"))
    c2 = f"https://{lab.hosts['c2'].address}:6443"
    # A longer grace period than the default (recent Kubernetes has 50 s, and a busy controller manager is
    # late) keeps c2's stale Ready=True in place past the 45 s freshness limit and the run after it.
    with lab.node_grace(150):
        lab.sh("c2", "systemctl stop k3s")
        try:
            # At once: c2's node is Ready and its Lease fresh, but its API server does not answer.
            result = cargoship("engine-config-sync", "-i", str(inventory), "--confirm")
            output = result.stdout + result.stderr
            assert result.returncode == 1, output
            assert f"not stopping c1: the API server of c2 at {c2} does not answer" in output, output
            # A refusal, said as one: the API the kubeconfig names answers.
            assert "cannot reach the Kubernetes API" not in output, output
            assert_untouched(lab, "c1", before)
            # Past the freshness limit (as the API shows the Lease), within the grace period: c2 still
            # shows Ready=True, and the stale Ready is named.
            wait_for(lambda: lab.lease_age("c2") > 46, "c2's Lease to be older than the freshness limit", 70)
            assert lab.node_ready("c2") == "True"
            result = cargoship("engine-config-sync", "-i", str(inventory), "--confirm")
            output = result.stdout + result.stderr
            assert result.returncode == 1, output
            assert "not stopping c1: controller c2 shows Ready but its kubelet last renewed its Lease" in output, output
            assert "cannot reach the Kubernetes API" not in output, output
            assert_untouched(lab, "c1", before)
        finally:
            lab.sh("c2", "systemctl start k3s")
    lab.wait_node("c2", "True")


def test_a_learner_holds_the_next_controller_until_it_is_a_voter(two_controllers):
    lab, inventory = two_controllers
    drift(lab, "c1", "c2")
    # c1's etcd member rejoins as a learner after its restart and is promoted 15 s later.
    with lab.learner_after_restart("c1", 15):
        result = cargoship("engine-config-sync", "-i", str(inventory), "--confirm")
        promoted = lab.promotions("c1")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert promoted, "c1 never was a learner"
    c1_started, c2_stopped = lab.loaded("c1")["started_at"], lab.downtimes("c2")[-1][0]
    assert c1_started < promoted[-1] <= c2_stopped, "c2 was stopped while c1 was still a learner"


def test_recover_goes_node_by_node_drains_first_and_fails_naming_a_node_that_stays_down(two_controllers, tmp_path):
    lab, inventory = two_controllers
    run_id = "lost-run"
    # As a run lost mid-sync leaves two nodes: cordoned by it, engines stopped; w1's kubelet will not
    # come back when its engine starts again.
    for name in ("c2", "w1"):
        lab.kubectl("cordon", name)
        lab.kubectl("annotate", "node", name, f"cargoship.io/cordoned-by={run_id}")
        lab.sh(name, f"systemctl stop {lab.service(name)}")
    lab.sh("w1", f"touch {KUBELET_DOWN}")
    try:
        recovered = subprocess.run(
            [
                "ansible-playbook",
                "-i",
                str(inventory),
                "cargoship.engine.recover",
                "-e",
                f"cargoship_run_id={run_id}",
                "-e",
                "cargoship_ready_timeout=15",
                "--limit",
                "c2,w1",
            ],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        output = " ".join(recovered.stdout.split())
        assert recovered.returncode != 0, output[-3000:]
        assert "not back: w1: Previous configuration unchanged" in output, output[-3000:]
        assert "node left cordoned, since its engine is not back" in output
        # c2 first, on its own (a controller), then w1: c2 was back before w1's engine started.
        assert lab.node_ready("c2") == "True" and not lab.core.read_node("c2").spec.unschedulable
        assert lab.loaded("c2")["started_at"] < lab.downtimes("w1")[-1][1]
        assert lab.core.read_node("w1").spec.unschedulable, "a node that is not back was given work"
        for name in ("c2", "w1"):
            assert lab.sh(name, "test -e /var/lib/cargoship/lock.json", check=False).returncode == 1
    finally:
        lab.sh("w1", f"rm -f {KUBELET_DOWN} && systemctl restart k3s-agent")
        lab.sh("c2", "systemctl start k3s")
        wait_for(lambda: lab.lease_age("w1") < 5, "w1's kubelet to be back", 60)
        lab.kubectl("uncordon", "w1")
        lab.kubectl("annotate", "node", "w1", "cargoship.io/cordoned-by-")


def test_a_controller_is_not_stopped_while_etcd_is_unhealthy(two_controllers):
    lab, inventory = two_controllers
    drift(lab, "c1")
    before = (engine_files(lab, "c1"), lab.starts("c1"))
    # An etcd check that fails is waited for (a leader election passes), up to the drain's timeout.
    with lab.etcd_unhealthy():
        result = cargoship("engine-config-sync", "-i", str(inventory), "--confirm", "-e", "cargoship_drain_timeout=10")
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "not stopping c1: the API server's etcd check fails (500" in output
    assert_untouched(lab, "c1", before)
    # Healthy again: the rollout goes through both controllers, one after the other, with c2's clock 25 s
    # behind (within the 30 s allowed): its running kubelet renews its Lease on that clock, so that the Lease
    # looks 25-35 s old to the control host, and c2 must still count as alive when c1 is to be stopped.
    with lab.clock_off("c2", -25):
        wait_for(lambda: lab.lease_age("c2") > 20, "c2's kubelet to renew its Lease on its skewed clock", 15)
        result = cargoship("engine-config-sync", "-i", str(inventory), "--confirm")
    assert result.returncode == 0, result.stdout + result.stderr
    assert lab.starts("c1") == before[1] + 1


@pytest.fixture(scope="module")
def rke2_fleet(lab_manager, tmp_path_factory):
    return converged_lab(
        lab_manager, tmp_path_factory.mktemp("rke2"), hosts=2, controllers=1, engine="rke2", version="v1.30.2+rke2r1"
    )


def test_an_rke2_server_that_never_signals_ready_is_bounded_and_rolled_back(rke2_fleet, tmp_path):
    lab, _converged = rke2_fleet
    # Valid to cargoship, refused by kube-apiserver: RKE2's static pod crash-loops and the server never
    # signals READY, so `systemctl start` would wait for ever.
    broken = {
        "apiVersion": "audit.k8s.io/v1",
        "kind": "Policy",
        # Well-formed to cargoship (its levels and stages are valid), refused by kube-apiserver at start.
        "rules": [{"level": "Metadata", "resources": [{"group": ""}], "nonResourceURLs": ["/healthz"]}],
    }
    inventory = desired_inventory(lab, tmp_path / "inv", cargoship_audit_policy=broken, cargoship_service_timeout=15)
    worker_starts = lab.starts("w1")
    result = cargoship("engine-config-sync", "-i", str(inventory), "--confirm", timeout=300)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "rke2-server did not come up and stay up within 15s: it is activating (start)" in output
    assert "Previous configuration restored" in output
    assert lab.unit("c1")["ActiveState"] == "active"
    assert lab.node_ready("c1") == "True"
    assert not lab.core.read_node("c1").spec.unschedulable
    assert "nonResourceURLs" not in lab.sh("c1", "cat /var/lib/rancher/rke2/server/cargoship-audit-policy.yaml").stdout
    assert lab.starts("w1") == worker_starts, "the worker after the failed controller was not touched"
    # The apiserver static pod as the restored start wrote it (RKE2 pkg/podtemplate; real-engines.md):
    # its arguments name the files the server loaded, FILE_HASH is the sha256 of their contents, so the
    # mirror pod in the API shows what the apiserver runs with, not what the files say later.
    container = lab.core.read_namespaced_pod("kube-apiserver-c1", "kube-system").spec.containers[0]
    paths = [arg.split("=", 1)[1] for arg in container.args]
    assert sorted(arg.split("=", 1)[0] for arg in container.args) == [
        "--admission-control-config-file",
        "--audit-policy-file",
    ]
    contents = b"".join(lab.sh("c1", f"cat {path}").stdout.encode() for path in paths)
    assert {env.name: env.value for env in container.env}["FILE_HASH"] == hashlib.sha256(contents).hexdigest()


def test_an_rke2_apiserver_is_proven_by_its_file_hash_and_one_that_kept_its_old_files_is_rolled_back(
    rke2_fleet, tmp_path
):
    lab, _converged = rke2_fleet
    policy = copy.deepcopy(EXAMPLE["cargoship_audit_policy"])
    policy["rules"].insert(0, {"level": "RequestResponse", "resources": [{"group": "", "resources": ["pods"]}]})
    nginx = {"rke2-ingress-nginx": {"values": {"controller": {"config": {"use-forwarded-headers": "false"}}}}}
    inventory = desired_inventory(lab, tmp_path / "new", cargoship_audit_policy=policy, cargoship_chart_values=nginx)
    report_path = tmp_path / "report.json"
    result = cargoship("engine-config-sync", "-i", str(inventory), "--confirm", "--report-json", str(report_path))
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    report = json.loads(report_path.read_text())
    # The apiserver runs with the files' contents, not only their names: RKE2's FILE_HASH says so.
    assert "audit policy: loaded (apiserver FILE_HASH matches)" in proven_lines(report, "c1")
    assert "pod security: loaded (apiserver FILE_HASH matches)" in proven_lines(report, "c1")
    # Each kind the inventory names is proven after a restart, not only the one that changed.
    assert "registries: containerd hosts.toml for 1 registry matches" in proven_lines(report, "c1")
    assert "rke2-ingress-nginx values: applied by helm-install job, hash matches" in proven_lines(report, "c1")
    container = lab.core.read_namespaced_pod("kube-apiserver-c1", "kube-system").spec.containers[0]
    stamp = stamp_of(lab, "c1")
    assert stamp["run"] == report["run_id"]
    assert stamp["apiserver_file_hash"] == {env.name: env.value for env in container.env}["FILE_HASH"]
    assert proven_lines(report, "w1") == [], "the worker had nothing to restart, so nothing to prove"

    # c1's engine keeps its previous start's configuration: its static pod still carries the old FILE_HASH.
    policy["rules"][0]["level"] = "Request"
    changed = desired_inventory(lab, tmp_path / "changed", cargoship_audit_policy=policy)
    audit_before = lab.sh("c1", "cat /var/lib/rancher/rke2/server/cargoship-audit-policy.yaml").stdout
    worker_starts = lab.starts("w1")
    output = run_keeping_previous(lab, "c1", changed)
    assert "node c1 does not run what was written: audit policy: the kube-apiserver static pod's FILE_HASH" in output
    assert lab.sh("c1", "cat /var/lib/rancher/rke2/server/cargoship-audit-policy.yaml").stdout == audit_before
    assert not lab.core.read_node("c1").spec.unschedulable
    assert stamp_of(lab, "c1")["run"] == report["run_id"], "no stamp without a proof"
    assert lab.starts("w1") == worker_starts
