"""Rollout shape on both engines: workers in batches never above the work concurrency; RKE2's own keys."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from helpers import cargoship, wait_for

pytestmark = pytest.mark.lab

REPO = Path(__file__).resolve().parents[2]


def with_desired_state(lab):
    (lab.state / "group_vars").mkdir(exist_ok=True)
    (lab.state / "group_vars" / "all.yml").write_text((REPO / "examples" / "group_vars" / "all.yml").read_text())
    return lab


def chart_configs(lab) -> list[str]:
    found = lab.custom.list_namespaced_custom_object("helm.cattle.io", "v1", "kube-system", "helmchartconfigs")
    return [item["metadata"]["name"] for item in found["items"]]


def mirror_pods(lab) -> dict[str, str]:
    pods = lab.core.list_namespaced_pod("kube-system").items
    return {
        p.metadata.name: p.metadata.uid for p in pods if "kubernetes.io/config.mirror" in (p.metadata.annotations or {})
    }


def most_at_once(intervals: list[tuple[float, float]]) -> int:
    edges = sorted([(start, 1) for start, _end in intervals] + [(end, -1) for _start, end in intervals])
    current = peak = 0
    for _moment, step in edges:
        current += step
        peak = max(peak, current)
    return peak


@pytest.mark.parametrize("limit", ["50%"])  # a percentage exercises the count path too (50 % of 4 is 2)
def test_workers_restart_in_batches_never_above_the_work_concurrency(lab_manager, limit):
    lab = with_desired_state(lab_manager.get(hosts=5, controllers=1, engine="k3s", fresh=True))
    result = cargoship("engine-config-sync", "-i", str(lab.inventory), "--confirm", "--work-concurrency", limit)
    assert result.returncode == 0, result.stdout + result.stderr
    worker_downtimes = [window for name in lab.workers for window in lab.downtimes(name)]
    assert len(worker_downtimes) == 4, "each worker restarts exactly once"
    assert most_at_once(worker_downtimes) == 2, "two workers at a time (of 4, with a limit of 2 or 50%)"
    controller_down = lab.downtimes("c1")
    assert len(controller_down) == 1
    assert controller_down[0][1] < min(stop for stop, _start in worker_downtimes), (
        "controllers finish before workers start"
    )


def test_rke2_fleet_converges_with_rke2_keys_and_a_second_dry_run_finds_nothing(lab_manager, tmp_path):
    lab = with_desired_state(
        lab_manager.get(hosts=3, controllers=2, engine="rke2", version="v1.30.2+rke2r1", fresh=True)
    )
    # Every RKE2 node carries mirror pods (kube-proxy; etcd and the control plane on servers), which a
    # drain leaves alone as kubectl drain does: not in the plan, the same pods after the run.
    mirrors = mirror_pods(lab)
    assert {f"kube-proxy-{name}" for name in lab.hosts} | {f"etcd-{name}" for name in lab.controllers} <= set(mirrors)
    report = tmp_path / "dry.json"
    dry = cargoship(
        "engine-config-sync", "-i", str(lab.inventory), "--dry-run", "--detailed-exitcode", "--report-json", str(report)
    )
    assert dry.returncode == 2, dry.stdout + dry.stderr
    plan = report.read_text()
    assert "evict default/web-" in plan
    assert not [name for name in mirrors if name in plan], "a mirror pod would be evicted"
    real = cargoship("engine-config-sync", "-i", str(lab.inventory), "--confirm")
    assert real.returncode == 0, real.stdout + real.stderr
    after = mirror_pods(lab)
    assert set(after) == set(mirrors), "a mirror pod is gone"
    # The kubelet replaces a mirror pod whose static pod changed (the kube-apiserver's, which now names the
    # audit policy and pod security files: real-engines.md, "What a running engine shows"); every other
    # mirror pod is the same object as before: none was evicted or deleted.
    unchanged = {name for name in mirrors if not name.startswith("kube-apiserver-")}
    assert {n: after[n] for n in unchanged} == {n: mirrors[n] for n in unchanged}, "a mirror pod was evicted or deleted"
    # RKE2's own ingress chart, on every controller: each server's engine applies its own manifests.
    manifest = "/var/lib/rancher/rke2/server/manifests/cargoship-rke2-ingress-nginx.yaml"
    contents = {lab.sh(controller, f"cat {manifest}").stdout for controller in lab.controllers}
    assert len(contents) == 1 and "use-forwarded-headers" in contents.pop()
    wait_for(lambda: "rke2-ingress-nginx" in chart_configs(lab), "the chart values to be applied", 30)
    dropin = yaml.safe_load(lab.sh("c1", "cat /etc/rancher/rke2/config.yaml.d/90-cargoship.yaml").stdout)
    assert dropin == {
        "audit-policy-file": "/var/lib/rancher/rke2/server/cargoship-audit-policy.yaml",
        "pod-security-admission-config-file": "/var/lib/rancher/rke2/server/cargoship-pod-security.yaml",
    }
    for controller in lab.controllers:
        assert set(lab.loaded(controller)["server_files"]) == {"audit-policy", "pod-security"}
        assert lab.sh(controller, "systemctl is-active rke2-server").stdout.strip() == "active"
    assert lab.loaded("w1")["registry_mirrors"] == ["docker.io"]
    assert lab.sh("w1", "test -e /etc/rancher/rke2/config.yaml.d/90-cargoship.yaml", check=False).returncode == 1
    # Controllers one at a time.
    (_c1_stop, c1_start), (c2_stop, _c2_start) = lab.downtimes("c1")[0], lab.downtimes("c2")[0]
    assert c1_start < c2_stop
    again = cargoship("engine-config-sync", "-i", str(lab.inventory), "--dry-run", "--detailed-exitcode")
    assert again.returncode == 0, again.stdout + again.stderr


def test_an_rke2_server_on_the_cis_profile_keeps_its_pod_security_file_unless_told(lab_manager, tmp_path):
    lab = with_desired_state(lab_manager.get(hosts=3, controllers=2, engine="rke2", version="v1.30.2+rke2r1"))
    dropin = "/etc/rancher/rke2/config.yaml.d/10-profile.yaml"
    # The drop-in directory exists only once something wrote a drop-in (this test may run first).
    lab.sh("c2", f"mkdir -p {dropin.rsplit('/', 1)[0]} && echo 'profile: cis' > {dropin}")
    try:
        refused = cargoship("engine-config-sync", "-i", str(lab.inventory), "--dry-run")
        output = refused.stdout + refused.stderr
        assert refused.returncode == 1, output
        assert f"c2 runs RKE2 with profile cis ({dropin}), whose pod-security admission file is rancher-restricted" in (
            " ".join(output.split())
        )
        group_vars = lab.state / "group_vars" / "all.yml"
        group_vars.write_text(group_vars.read_text() + "\ncargoship_pod_security_over_cis: true\n")
        told = cargoship("engine-config-sync", "-i", str(lab.inventory), "--dry-run")
        assert told.returncode == 0, told.stdout + told.stderr
    finally:
        lab.sh("c2", f"rm -f {dropin}")
        with_desired_state(lab)
