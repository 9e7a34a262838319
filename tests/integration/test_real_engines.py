"""The rollout against engines as unkind as the real ones (../shared/notes/real-engines.md): a stopped
kubelet leaves its old Ready=True behind, a start can wait for ever, a crash loop is never 'failed'."""

from __future__ import annotations

import copy
import datetime
import json
import re
import subprocess
import threading
import time

import pytest
from helpers import (
    EXAMPLE,
    KUBELET_DOWN,
    budget_refusing_every_eviction,
    cargoship,
    converged_lab,
    desired_inventory,
    drift,
    engine_files,
    proven_lines,
    run_keeping_previous,
    stamp_of,
    start_cargoship,
    undrift,
    wait_for,
)

pytestmark = pytest.mark.lab
# The k3s fleet's tests, in this file's order on one lab (test_real_engines_control_plane.py has those of two
# controllers and of RKE2, on a worker of their own). A fixture's lab handle is valid only until another
# shape replaces the lab.


@pytest.fixture(scope="module")
def k3s_fleet(lab_manager, tmp_path_factory):
    return converged_lab(lab_manager, tmp_path_factory.mktemp("k3s"), hosts=3, controllers=1, engine="k3s")


def test_a_node_whose_kubelet_never_comes_back_is_rolled_back_and_stops_the_rollout(k3s_fleet, tmp_path):
    lab, _converged = k3s_fleet
    # A short wait for Ready (the default is 180 s): the kubelet does not come back, whatever the wait.
    inventory = desired_inventory(lab, tmp_path / "inv", cargoship_ready_timeout=20)
    drift(lab, "w1", "w2")
    before = {name: (engine_files(lab, name), lab.starts(name)) for name in ("w1", "w2")}
    loaded_before = lab.loaded("w1")["started_at"]
    began = datetime.datetime.now(datetime.UTC)
    lab.sh("w1", f"touch {KUBELET_DOWN}")

    def kubelet_back_for_the_rollback() -> None:
        # The engine signals READY on its new files while its kubelet never returns; once it has, the
        # kubelet may come back for the rollback's own restart.
        wait_for(lambda: lab.loaded("w1")["started_at"] > loaded_before, "w1's engine to start on the new files", 120)
        lab.sh("w1", f"rm -f {KUBELET_DOWN}")

    helper = threading.Thread(target=kubelet_back_for_the_rollback, daemon=True)
    helper.start()
    try:
        result = cargoship("engine-config-sync", "-i", str(inventory), "--confirm", timeout=600)
    finally:
        helper.join(timeout=5)
        lab.sh("w1", f"rm -f {KUBELET_DOWN}")
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "w1" in output and "not back within 20s: its kubelet has not renewed its Lease" in output
    assert "Previous configuration restored" in output
    # w1 is as before, on a kubelet started after the rollback; w2, after it, was not touched.
    assert engine_files(lab, "w1") == before["w1"][0]
    assert lab.node_ready("w1") == "True" and lab.lease_renewed("w1") > began
    assert not lab.core.read_node("w1").spec.unschedulable
    assert (engine_files(lab, "w2"), lab.starts("w2")) == before["w2"]
    for name in lab.hosts:
        assert lab.sh(name, "test -e /var/lib/cargoship/lock.json", check=False).returncode == 1


def test_a_crash_looping_engine_is_down_in_a_dry_run_and_a_rollback_that_cannot_help_says_so(k3s_fleet, tmp_path):
    lab, converged = k3s_fleet
    dropin = "/etc/rancher/k3s/config.yaml.d/50-server-key.yaml"
    # A server-only key where a k3s agent reads: it exits at once, and systemd restarts it every 5 s.
    lab.sh("w2", f"mkdir -p /etc/rancher/k3s/config.yaml.d && echo 'cluster-init: true' > {dropin}")
    restarts = lab.unit("w2")["NRestarts"]
    lab.sh("w2", "systemctl restart --no-block k3s-agent")
    # A pod of the web app on w2: evicted, it stays Terminating while no kubelet runs there to stop it.
    web = next(rs for rs in lab.apps.list_namespaced_replica_set("default").items if rs.metadata.name == "web")
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": web.metadata.uid, "controller": True}
    lab.core.create_namespaced_pod(
        "default",
        {
            "metadata": {"name": "web-on-w2", "labels": {"app": "web"}, "ownerReferences": [owner]},
            "spec": {
                "nodeName": "w2",
                "terminationGracePeriodSeconds": 2,
                "containers": [{"name": "c", "image": "nginx"}],
            },
        },
    )
    try:
        wait_for(lambda: lab.unit("w2")["NRestarts"] > restarts, "w2 to crash-loop", 30)
        dry = cargoship(
            "engine-config-sync", "-i", str(converged), "--dry-run", "--report-json", str(tmp_path / "d.json")
        )
        assert dry.returncode == 0, dry.stdout + dry.stderr
        plan = (tmp_path / "d.json").read_text()
        # Read between two tries (auto-restart) or during one (start: a busy machine makes that part longer).
        assert re.search(
            r"drain and restart k3s-agent \(its engine is activating \((auto-restart|start)\): a node whose engine",
            plan,
        ), plan
        inventory = desired_inventory(lab, tmp_path / "inv", cargoship_service_timeout=12)
        report = tmp_path / "real.json"
        real = cargoship(
            "engine-config-sync", "-i", str(inventory), "--confirm", "--report-json", str(report), timeout=600
        )
        output = real.stdout + real.stderr
        assert real.returncode == 1, output
        assert "k3s-agent did not come up and stay up within 12s: it is activating" in output
        assert "NOT back" in output and "cargoship.engine.recover -e cargoship_run_id=" in output
        # Not back, so not given work: it stays cordoned, and the report says why.
        assert "node left cordoned, since its engine is not back" in " ".join(output.split())
        assert lab.core.read_node("w2").spec.unschedulable
        # The drain evicted the pod and went on: nothing could finish it before the engine runs again
        # (waiting would have lasted cargoship_drain_timeout, 300 s, and then failed).
        w2 = next(p for p in json.loads(report.read_text())["phases"] if p["name"] == "sync_worker")["hosts"]["w2"]
        assert "evict default/web-on-w2" in w2["changes"], w2
        # (A file written is a dict in the report; the drain's lines are text.)
        assert any(
            str(c).startswith("not waiting for the evicted pods to terminate: the kubelet of w2") for c in w2["changes"]
        ), w2
    finally:
        lab.sh("w2", f"rm -f {dropin}")
    wait_for(lambda: lab.unit("w2")["ActiveState"] == "active", "w2 to come back by itself", 30)
    again = cargoship("engine-config-sync", "-i", str(converged), "--confirm")
    assert again.returncode == 0, again.stdout + again.stderr
    assert not lab.core.read_node("w2").spec.unschedulable


def test_a_drain_refuses_pods_without_a_controller_unless_forced_and_names_emptydir_data(k3s_fleet, tmp_path):
    lab, converged = k3s_fleet
    web = next(rs for rs in lab.apps.list_namespaced_replica_set("default").items if rs.metadata.name == "web")
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": web.metadata.uid, "controller": True}
    # scratch takes 6 s to terminate once evicted: the engine must not stop before it is gone.
    for name, owners, grace in (("solo", [], 1), ("scratch", [owner], 6)):
        lab.core.create_namespaced_pod(
            "default",
            {
                "metadata": {"name": name, "labels": {"app": "extra"}, "ownerReferences": owners},
                "spec": {
                    "nodeName": "w1",
                    "terminationGracePeriodSeconds": grace,
                    "containers": [{"name": "c", "image": "busybox"}],
                    "volumes": [{"name": "tmp", "emptyDir": {}}],
                },
            },
        )
    drift(lab, "w1")
    before = (engine_files(lab, "w1"), lab.starts("w1"))
    try:
        dry = cargoship(
            "engine-config-sync", "-i", str(converged), "--dry-run", "--report-json", str(tmp_path / "d.json")
        )
        assert dry.returncode == 0, dry.stdout + dry.stderr
        plan = (tmp_path / "d.json").read_text()
        assert "evict default/scratch (its emptyDir data is lost)" in plan
        assert "drain of w1 refused: default/solo has no controller" in plan

        refused = cargoship("engine-config-sync", "-i", str(converged), "--confirm")
        assert refused.returncode == 1, refused.stdout + refused.stderr
        assert "drain of w1 refused: default/solo has no controller" in refused.stdout + refused.stderr
        assert not lab.core.read_node("w1").spec.unschedulable, "a refused drain does not even cordon"
        assert (engine_files(lab, "w1"), lab.starts("w1")) == before
        assert "solo" in [p.metadata.name for p in lab.core.list_namespaced_pod("default").items]

        forced = desired_inventory(lab, tmp_path / "forced", cargoship_drain_force=True)
        gone_at: list[float] = []
        watcher = threading.Thread(target=lambda: gone_at.append(when_pod_gone(lab, "scratch")), daemon=True)
        watcher.start()
        done = cargoship("engine-config-sync", "-i", str(forced), "--confirm")
        assert done.returncode == 0, done.stdout + done.stderr
        assert "solo" not in [p.metadata.name for p in lab.core.list_namespaced_pod("default").items]
        assert lab.starts("w1") == before[1] + 1
        watcher.join(timeout=5)
        stopped_at = lab.downtimes("w1")[-1][0]
        assert gone_at and gone_at[0] < stopped_at, "the engine stopped while an evicted pod was still terminating"
    finally:
        for name in ("solo", "scratch"):
            if name in [p.metadata.name for p in lab.core.list_namespaced_pod("default").items]:
                lab.core.delete_namespaced_pod(name, "default")


def when_pod_gone(lab, name: str, namespace: str = "default", timeout: float = 300) -> float:
    """The moment (this host's clock, which the lab's hosts share) a pod left the API."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if name not in [p.metadata.name for p in lab.core.list_namespaced_pod(namespace).items]:
            return time.time()
        time.sleep(0.25)
    raise AssertionError(f"pod {name} never went")


def test_a_pod_two_budgets_cover_is_refused_before_the_cordon(k3s_fleet, tmp_path):
    lab, converged = k3s_fleet
    budgets = ("web-a", "web-b")
    for name in budgets:  # each would allow the eviction; together the API refuses it (500)
        lab.policy.create_namespaced_pod_disruption_budget(
            "default",
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": name},
                "spec": {"maxUnavailable": 5, "selector": {"matchLabels": {"app": "web"}}},
            },
        )
    web = next(rs for rs in lab.apps.list_namespaced_replica_set("default").items if rs.metadata.name == "web")
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": web.metadata.uid, "controller": True}
    lab.core.create_namespaced_pod(
        "default",
        {
            "metadata": {"name": "web-on-w1", "labels": {"app": "web"}, "ownerReferences": [owner]},
            "spec": {"nodeName": "w1", "terminationGracePeriodSeconds": 1, "containers": [{"name": "c", "image": "x"}]},
        },
    )
    drift(lab, "w1")
    before = (engine_files(lab, "w1"), lab.starts("w1"))
    refusal = "default/web-on-w1 is covered by more than one PodDisruptionBudget (default/web-a, default/web-b)"
    try:
        dry = cargoship(
            "engine-config-sync", "-i", str(converged), "--dry-run", "--report-json", str(tmp_path / "d.json")
        )
        assert dry.returncode == 0, dry.stdout + dry.stderr
        assert refusal in (tmp_path / "d.json").read_text()
        real = cargoship("engine-config-sync", "-i", str(converged), "--confirm")
        output = real.stdout + real.stderr
        assert real.returncode == 1, output
        assert "drain of w1 refused: " in output and refusal in output, output
        assert "was lost" not in output, "a node with nothing to do is not lost"
        assert not lab.core.read_node("w1").spec.unschedulable, "a refused drain does not even cordon"
        assert (engine_files(lab, "w1"), lab.starts("w1")) == before
    finally:
        for name in budgets:
            lab.policy.delete_namespaced_pod_disruption_budget(name, "default")
        lab.core.delete_namespaced_pod("web-on-w1", "default")
        undrift(lab, "w1")  # nothing was written to w1: its engine runs what the file says again


def test_the_recovery_takes_the_lock_before_it_restores_anything(k3s_fleet):
    lab, converged = k3s_fleet
    registries = "/etc/rancher/k3s/registries.yaml"
    backup = "/var/lib/cargoship/backups/interrupted-run"
    # What an interrupted run "interrupted-run" left on w1: its backup of the previous registries.yaml.
    lab.sh(
        "w1",
        f"mkdir -p {backup} && sed 's/registry.internal.example/previous.example/' {registries} > {backup}/000-registries.yaml"
        f' && echo \'{{"{registries}": "{backup}/000-registries.yaml"}}\' > {backup}/index.json',
    )
    # Meanwhile another run took w1 over.
    lab.sh(
        "w1",
        'mkdir -p /var/lib/cargoship && echo \'{"run_id": "other-run", "holder": {"user": "bob"}}\' '
        "> /var/lib/cargoship/lock.json",
    )
    current = engine_files(lab, "w1")
    recover = [
        "ansible-playbook",
        "-i",
        str(converged),
        "cargoship.engine.recover",
        "-e",
        "cargoship_run_id=interrupted-run",
        "--limit",
        "w1",
    ]
    try:
        refused = subprocess.run(recover, capture_output=True, text=True, timeout=300, check=False)
        assert refused.returncode != 0, refused.stdout[-2000:]
        assert "locked by run other-run" in refused.stdout
        assert engine_files(lab, "w1") == current, "nothing is restored on a host another run holds"
        lab.sh("w1", "rm -f /var/lib/cargoship/lock.json")
        done = subprocess.run(recover, capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stdout[-2000:]
        assert "previous.example" in lab.sh("w1", f"cat {registries}").stdout
        assert lab.sh("w1", "test -e /var/lib/cargoship/lock.json", check=False).returncode == 1
    finally:
        lab.sh("w1", f"rm -rf {backup} /var/lib/cargoship/lock.json")
        assert cargoship("engine-config-sync", "-i", str(converged), "--confirm").returncode == 0


def test_two_runs_with_different_limits_cannot_restart_one_cluster_at_once(k3s_fleet, tmp_path):
    lab, converged = k3s_fleet
    drift(lab, "w1", "w2")
    w2_before = (engine_files(lab, "w2"), lab.starts("w2"))
    with budget_refusing_every_eviction(lab, holding=("w1",)):
        first = start_cargoship("engine-config-sync", "-i", str(converged), "--confirm", "--limit", "w1")
        try:
            wait_for(lambda: lab.core.read_node("w1").spec.unschedulable, "the first run to drain w1", 120)
            second = cargoship("engine-config-sync", "-i", str(converged), "--confirm", "--limit", "w2")
            assert second.returncode == 4, second.stdout + second.stderr
            assert "locked by run" in second.stderr
            assert (engine_files(lab, "w2"), lab.starts("w2")) == w2_before, "w2 was touched by the second run"
            assert not lab.core.read_node("w2").spec.unschedulable
        except BaseException:
            first.kill()
            raise
    out, err = first.communicate(timeout=300)
    assert first.returncode == 0, out + err
    for name in lab.hosts:
        assert lab.sh(name, "test -e /var/lib/cargoship/lock.json", check=False).returncode == 1, f"lock left on {name}"
    undrift(lab, "w2")  # the first run converged w1; nothing was written to w2


def test_a_run_that_lost_its_lock_gives_the_node_back_before_stopping_its_engine(k3s_fleet):
    lab, converged = k3s_fleet
    drift(lab, "w1")
    before = (engine_files(lab, "w1"), lab.starts("w1"))
    with budget_refusing_every_eviction(lab, holding=("w1",)):
        run = start_cargoship("engine-config-sync", "-i", str(converged), "--confirm")
        try:
            wait_for(lambda: lab.core.read_node("w1").spec.unschedulable, "the run to drain w1", 120)
            # Someone broke the lock and another run took w1 while the drain waited.
            lab.sh(
                "w1",
                'echo \'{"run_id": "other-run", "holder": {"user": "carol"}}\' > /var/lib/cargoship/lock.json',
            )
        except BaseException:
            run.kill()
            raise
    try:
        out, err = run.communicate(timeout=300)
        assert run.returncode == 1, out + err
        assert "cannot touch a lock this run does not hold (held by run other-run" in out + err
        assert (engine_files(lab, "w1"), lab.starts("w1")) == before, "the engine was stopped or written to"
        assert not lab.core.read_node("w1").spec.unschedulable, "the node was not given back"
    finally:
        lab.sh("w1", "rm -f /var/lib/cargoship/lock.json")
        undrift(lab, "w1")  # given back before its engine was stopped or written to


def test_an_api_that_errs_for_a_while_is_ridden_through_in_a_drain_and_in_a_ready_wait(k3s_fleet):
    """503 for 20 s from the moment w1's drain begins (its evicted pods are still terminating, its Ready
    wait follows within the 20 s), then 429 with Retry-After on every read for 20 s from the moment w2's
    engine stops: the run rides through both, nothing is rolled back."""
    lab, converged = k3s_fleet
    drift(lab, "w1", "w2")
    starts = {name: lab.starts(name) for name in ("w1", "w2")}
    stops_w2 = len(lab.downtimes("w2"))
    met: list[int] = []

    def inject() -> None:
        wait_for(lambda: bool(lab.core.read_node("w1").spec.unschedulable), "w1's drain to begin", 300)
        lab.lab_setting("/lab/faults", {"faults": [{"kind": "status", "status": 503, "seconds": 20}]})
        wait_for(lambda: len(lab.downtimes("w2")) > stops_w2, "w2's engine to stop", 300)
        met.append(lab.lab_setting("/lab/faults")["faults"][0]["hits"])
        slow_down = {"kind": "status", "status": 429, "retry_after": 3, "seconds": 20, "methods": ["GET"]}
        lab.lab_setting("/lab/faults", {"faults": [slow_down]})

    injector = threading.Thread(target=inject, daemon=True)
    injector.start()
    try:
        result = cargoship("engine-config-sync", "-i", str(converged), "--confirm", timeout=600)
        injector.join(timeout=60)
        met.append(lab.lab_setting("/lab/faults")["faults"][0]["hits"])
    finally:
        lab.lab_setting("/lab/faults", {"faults": []})
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert len(met) == 2 and all(met), f"each fault was met: {met}"
    assert "Previous configuration" not in output, "a node was rolled back"
    assert {name: lab.starts(name) for name in ("w1", "w2")} == {name: n + 1 for name, n in starts.items()}
    assert not any(lab.core.read_node(name).spec.unschedulable for name in lab.hosts)


def test_a_definite_refusal_of_the_api_fails_at_once_with_its_message(k3s_fleet, tmp_path):
    lab, _converged = k3s_fleet
    inventory = desired_inventory(lab, tmp_path / "inv", cargoship_force=True)
    before = {name: (engine_files(lab, name), lab.starts(name)) for name in lab.hosts}
    # RBAC that lets the operator read nodes but not cordon them (the kubelets, with their own credentials,
    # still post their nodes' status).
    refusal = {
        "kind": "status",
        "status": 403,
        "paths": ["/api/v1/nodes/"],
        "methods": ["PATCH"],
        "users": ["lab-operator"],
    }
    with lab.api_faults(refusal):
        result = cargoship("engine-config-sync", "-i", str(inventory), "--confirm")
        hits = lab.lab_setting("/lab/faults")["faults"][0]["hits"]
    output = " ".join((result.stdout + result.stderr).split())
    assert result.returncode == 1, output
    assert (
        'Kubernetes API refused drained of node c1: 403 nodes is forbidden: User "lab-operator" cannot patch' in output
    )
    assert hits == 1, f"a definite refusal was tried again ({hits} times)"
    for name in lab.hosts:
        assert (engine_files(lab, name), lab.starts(name)) == before[name], f"{name} was touched"
        assert not lab.core.read_node(name).spec.unschedulable


def test_a_restarted_node_is_proven_to_run_what_was_written_and_one_whose_engine_kept_its_old_files_is_rolled_back(
    k3s_fleet, tmp_path
):
    lab, _converged = k3s_fleet
    # The run that converged the fleet proved and stamped every node it restarted.
    first = {name: stamp_of(lab, name) for name in ("c1", "w1", "w2")}
    assert all(first.values()), first
    assert first["w1"]["digest"] == first["w2"]["digest"] != first["c1"]["digest"]
    assert first["c1"]["kinds"] == ["audit_policy", "pod_security", "registries"]

    two_mirrors = copy.deepcopy(EXAMPLE["cargoship_registries"])
    two_mirrors["mirrors"]["ghcr.io"] = {"endpoint": ["mirror.internal.example:5000"]}
    traefik = {"traefik": {"values": {"ports": {"websecure": {"tls": {"enabled": False}}}}}}
    inventory = desired_inventory(
        lab, tmp_path / "two", cargoship_registries=two_mirrors, cargoship_chart_values=traefik
    )
    report_path = tmp_path / "report.json"
    result = cargoship("engine-config-sync", "-i", str(inventory), "--confirm", "--report-json", str(report_path))
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    report = json.loads(report_path.read_text())
    for name in ("c1", "w1", "w2"):
        assert "registries: containerd hosts.toml for 2 registries matches" in proven_lines(report, name), name
        stamp = stamp_of(lab, name)
        assert stamp["run"] == report["run_id"] and stamp["digest"] != first[name]["digest"]
        # The engine's own fingerprint at the proof: what a later restart on other files would change.
        annotations = lab.core.read_node(name).metadata.annotations
        assert stamp["node_config_hash"] == annotations["k3s.io/node-config-hash"]
    # k3s shows which file its apiserver was given, not a hash of it: the line says so.
    assert (
        "audit policy: loaded (k3s started with audit-policy-file=/var/lib/rancher/k3s/server/cargoship-audit-policy.yaml;"
        " it shows no hash of the file)" in proven_lines(report, "c1")
    )
    assert "w1: proven registries: containerd hosts.toml for 2 registries matches" in output
    # The new chart values need no restart: helm-controller's job with their hash is their proof.
    assert "traefik values: applied by helm-install job, hash matches" in proven_lines(report, "c1")

    # w1's engine keeps the configuration of its previous start, as an engine that ignores a file would: its
    # restart and its Ready prove nothing; its containerd's hosts.toml still lists two registries.
    w1_files, w2_state = engine_files(lab, "w1"), (engine_files(lab, "w2"), lab.starts("w2"))
    output = run_keeping_previous(lab, "w1", desired_inventory(lab, tmp_path / "one"))
    assert "node w1 does not run what was written: registries: containerd's generated hosts.toml" in output
    assert "ghcr.io (https://mirror.internal.example:5000)" in output
    assert engine_files(lab, "w1") == w1_files, "w1 has its previous files back"
    assert not lab.core.read_node("w1").spec.unschedulable
    assert stamp_of(lab, "w1")["run"] == report["run_id"], "the stamp is written only after a proof"
    assert stamp_of(lab, "c1")["run"] != report["run_id"], "c1, before w1, was proven by this run"
    assert (engine_files(lab, "w2"), lab.starts("w2")) == w2_state, "the node after w1 was not touched"


def fleet_status(inventory) -> dict:
    result = cargoship("status", "-i", str(inventory), "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    return {name: entry["status"] for name, entry in json.loads(result.stdout)["nodes"].items()}


def test_status_maps_the_fleet_from_the_api_alone(k3s_fleet, tmp_path):
    lab, _converged = k3s_fleet
    # No host can be reached over SSH: the map comes from the API and the inventory alone.
    inventory = desired_inventory(lab, tmp_path / "same", ansible_port=1)
    converge = cargoship("engine-config-sync", "-i", str(desired_inventory(lab, tmp_path / "ssh")), "--confirm")
    assert converge.returncode == 0, converge.stdout + converge.stderr
    assert fleet_status(inventory) == {"c1": "proven", "w1": "proven", "w2": "proven"}
    text = cargoship("status", "-i", str(inventory), "--detailed-exitcode")
    assert text.returncode == 0 and "every node runs the inventory's desired state, proven" in text.stdout
    # The same map for ansible-playbook users, from the collection's playbook.
    playbook = subprocess.run(
        ["ansible-playbook", "-i", str(inventory), "cargoship.engine.status"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert playbook.returncode == 0, playbook.stdout[-3000:]
    assert "every node runs the inventory's desired state, proven" in playbook.stdout

    # The inventory's desired state changes: no node runs it yet.
    moved = copy.deepcopy(EXAMPLE["cargoship_registries"])
    moved["mirrors"]["docker.io"]["endpoint"] = ["https://registry.elsewhere.example:5000"]
    changed = desired_inventory(lab, tmp_path / "changed", ansible_port=1, cargoship_registries=moved)
    assert set(fleet_status(changed).values()) == {"not the desired state"}
    assert cargoship("status", "-i", str(changed), "--detailed-exitcode").returncode == 2

    # w2's engine restarted by hand with another file: its evidence is no longer the one it was proven with.
    dropin = "/etc/rancher/k3s/config.yaml.d/50-by-hand.yaml"
    lab.sh(
        "w2",
        f"mkdir -p {dropin.rsplit('/', 1)[0]} && printf 'node-label:\\n  - by-hand=true\\n' > {dropin}"
        " && systemctl restart k3s-agent",
    )
    try:
        wait_for(lambda: fleet_status(inventory)["w2"] == "changed since proven", "w2's new evidence in the API", 60)
        assert fleet_status(inventory)["w1"] == "proven"
    finally:
        lab.sh("w2", f"rm -f {dropin} && systemctl restart k3s-agent")


def test_chart_values_that_helm_controller_does_not_apply_are_put_back_and_stop_the_rollout(k3s_fleet, tmp_path):
    lab, _converged = k3s_fleet
    converge = cargoship("engine-config-sync", "-i", str(desired_inventory(lab, tmp_path / "same")), "--confirm")
    assert converge.returncode == 0, converge.stdout + converge.stderr
    chart_file = "/var/lib/rancher/k3s/server/manifests/cargoship-traefik.yaml"
    before = lab.sh("c1", f"cat {chart_file}").stdout
    worker_starts = {name: lab.starts(name) for name in ("w1", "w2")}
    traefik = {"traefik": {"values": {"replicas": 3}}}
    inventory = desired_inventory(lab, tmp_path / "new", cargoship_chart_values=traefik, cargoship_proof_timeout=20)
    lab.sh("c1", "touch /etc/cargoship-lab/helm-controller-stalled")
    try:
        result = cargoship("engine-config-sync", "-i", str(inventory), "--confirm", timeout=600)
    finally:
        lab.sh("c1", "rm -f /etc/cargoship-lab/helm-controller-stalled")
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert (
        "the chart values written are not applied: traefik values: no helm-install-traefik job with the values' hash"
        in output
    )
    assert "Previous chart values restored" in output
    assert lab.sh("c1", f"cat {chart_file}").stdout == before
    assert {name: lab.starts(name) for name in ("w1", "w2")} == worker_starts, "the workers after c1 were not touched"
