"""The test bed itself: if these fail, no other lab test means anything."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import subprocess
import time

import pytest
from kubernetes.client.rest import ApiException

pytestmark = pytest.mark.lab


def test_every_host_answers_ansible_ping_over_ssh(lab):
    result = subprocess.run(
        ["ansible", "-i", str(lab.inventory), "all", "-m", "ansible.builtin.ping"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    for name in lab.hosts:
        assert f"{name} | SUCCESS" in result.stdout


def test_login_is_by_key_only(lab):
    host = lab.hosts["c1"]
    result = subprocess.run(
        [
            "ssh",
            "-o",
            f"UserKnownHostsFile={lab.state / 'known_hosts'}",
            "-o",
            "BatchMode=yes",
            "-o",
            "PubkeyAuthentication=no",
            "-o",
            "PreferredAuthentications=password,keyboard-interactive",
            f"cargo@{host.address}",
            "true",
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 255
    assert "Permission denied (publickey)" in result.stderr


def test_systemd_is_pid_one_and_running_on_every_host(lab):
    for name in lab.hosts:
        assert lab.sh(name, "cat /proc/1/comm").stdout.strip() == "systemd"
        assert lab.sh(name, "systemctl is-system-running", check=False).stdout.strip() == "running"


def test_hosts_are_isolated_from_each_other(lab):
    marker = f"/root/only-on-c1-{time.time_ns()}"
    lab.sh("c1", f"touch {marker}")
    try:
        for name, host in lab.hosts.items():
            assert lab.sh(name, "hostname", sudo=False).stdout.strip() == name
            addresses = lab.sh(name, "ip -o -4 addr show scope global", sudo=False).stdout
            assert host.address in addresses
            assert all(other.address not in addresses for other in lab.hosts.values() if other is not host)
            exists = lab.sh(name, f"test -e {marker}", check=False).returncode == 0
            assert exists == (name == "c1"), f"{marker} visible on {name}"
        # Each host sees only its own processes.
        token = f"isolation-{time.time_ns()}"
        lab.sh("w1", f"systemd-run --unit {token} /bin/bash -c 'exec -a {token} sleep 60'")
        assert lab.sh("w1", f"pgrep -f {token}", check=False, sudo=False).returncode == 0
        for name in ("c1", "w2"):
            assert lab.sh(name, f"pgrep -f {token}", check=False, sudo=False).returncode == 1
        lab.sh("w1", f"systemctl stop {token}", check=False)
    finally:
        lab.sh("c1", f"rm -f {marker}")


def test_hosts_reach_each_other_over_the_lab_network(lab):
    c1 = lab.hosts["c1"].address
    result = lab.sh("w1", f"python3 -c \"import socket; socket.create_connection(('{c1}', 22), 3)\"", sudo=False)
    assert result.returncode == 0


def test_engine_reports_its_version_in_the_real_format(lab):
    lab.sh("w2", "echo v1.29.6+k3s2 > /etc/cargoship-lab/engine-version")
    try:
        out = lab.sh("w2", "k3s --version", sudo=False).stdout.splitlines()
        assert out[0].startswith("k3s version v1.29.6+k3s2 (") and out[0].endswith(")")
        assert out[1].startswith("go version go1.")
    finally:
        lab.sh("w2", "echo v1.30.2+k3s1 > /etc/cargoship-lab/engine-version")


def wait_until(condition, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def test_a_malformed_config_file_is_fatal_and_the_unit_restarts_the_engine_for_ever(lab):
    config = "/etc/rancher/k3s/config.yaml"
    lab.sh("w1", f"cp {config} /root/config.yaml.good && echo 'node-label: [unclosed' >> {config}")
    restarts = lab.unit("w1")["NRestarts"]
    try:
        lab.sh("w1", "systemctl restart --no-block k3s-agent")
        # Restart=always, RestartSec=5s, no start limit: never "failed", restarted every 5 s.
        wait_until(lambda: lab.unit("w1")["NRestarts"] >= restarts + 2, "two restarts by systemd", timeout=30)
        assert lab.unit("w1")["ActiveState"] in ("activating", "deactivating")
        journal = lab.sh("w1", "journalctl -u k3s-agent --no-pager -n 50").stdout
        assert "level=fatal" in journal and "failed to parse config file" in journal
    finally:
        lab.sh("w1", f"cp /root/config.yaml.good {config} && systemctl restart k3s-agent")
    assert lab.unit("w1")["ActiveState"] == "active"


def test_a_malformed_registries_file_keeps_the_engine_starting_for_ever(lab):
    registries = "/etc/rancher/k3s/registries.yaml"
    lab.sh("w2", f"cp -a {registries} /root/registries.yaml.good 2>/dev/null; echo 'mirrors: [unclosed' > {registries}")
    restarts = lab.unit("w2")["NRestarts"]
    try:
        # `systemctl start` would wait for ever: the unit has no start timeout and the engine never
        # signals READY; it does not exit either, it retries.
        since = lab.sh("w2", "date +%s").stdout.strip()
        lab.sh("w2", "systemctl restart --no-block k3s-agent")
        # Two tries 5 s apart, in the same process: the unit neither restarted nor failed meanwhile.
        journal = f"journalctl -u k3s-agent --no-pager --since @{since} -o cat"
        wait_until(lambda: lab.sh("w2", journal).stdout.count("retrying in 5s") >= 2, "a second try", timeout=20)
        unit = lab.unit("w2")
        assert (unit["ActiveState"], unit["SubState"], unit["NRestarts"]) == ("activating", "start", restarts)
        assert "retrying in 5s" in lab.sh("w2", "journalctl -u k3s-agent --no-pager -n 20").stdout
    finally:
        lab.sh(
            "w2",
            f"if [ -e /root/registries.yaml.good ]; then mv /root/registries.yaml.good {registries}; "
            f"else rm -f {registries}; fi; systemctl restart k3s-agent",
        )
    assert lab.unit("w2")["ActiveState"] == "active"


def test_a_k3s_agent_given_a_server_only_key_exits_and_is_restarted(lab):
    dropin = "/etc/rancher/k3s/config.yaml.d/50-server-key.yaml"
    lab.sh("w1", f"mkdir -p /etc/rancher/k3s/config.yaml.d && echo 'cluster-init: true' > {dropin}")
    restarts = lab.unit("w1")["NRestarts"]
    try:
        lab.sh("w1", "systemctl restart --no-block k3s-agent")
        wait_until(lambda: lab.unit("w1")["NRestarts"] > restarts, "a restart by systemd", timeout=20)
        assert (
            "flag provided but not defined: -cluster-init"
            in lab.sh("w1", "journalctl -u k3s-agent --no-pager -n 20").stdout
        )
    finally:
        lab.sh("w1", f"rm -f {dropin} && systemctl restart k3s-agent")
    assert lab.unit("w1")["ActiveState"] == "active"


def test_restart_picks_up_new_config_and_ignores_unknown_keys(lab):
    before = lab.loaded("w2")
    starts = lab.starts("w2")
    lab.sh(
        "w2",
        "mkdir -p /etc/rancher/k3s/config.yaml.d && "
        "printf 'node-label: [tier=edge]\\nnot-a-k3s-key: 1\\n' > /etc/rancher/k3s/config.yaml.d/50-test.yaml",
    )
    try:
        lab.sh("w2", "systemctl restart k3s-agent")
        after = lab.loaded("w2")
        assert after["started_at"] > before["started_at"]
        assert "/etc/rancher/k3s/config.yaml.d/50-test.yaml" in after["files"]
        assert lab.starts("w2") == starts + 1
        journal = lab.sh("w2", "journalctl -u k3s-agent --no-pager -n 30").stdout
        assert "Unknown flag --not-a-k3s-key found in config.yaml, skipping" in journal
        assert lab.sh("w2", "systemctl is-active k3s-agent").stdout.strip() == "active"
    finally:
        lab.sh("w2", "rm -rf /etc/rancher/k3s/config.yaml.d && systemctl restart k3s-agent")


def test_server_loads_audit_policy_through_kube_apiserver_arg_on_k3s(lab):
    audit = "/var/lib/rancher/k3s/server/audit.yaml"
    config = "/etc/rancher/k3s/config.yaml"
    lab.sh(
        "c1",
        f"cp {config} /root/config.yaml.good && "
        f"printf 'apiVersion: audit.k8s.io/v1\\nkind: Policy\\nrules:\\n- level: Metadata\\n' > {audit} && "
        f"printf 'kube-apiserver-arg:\\n- audit-policy-file={audit}\\n' >> {config}",
    )
    try:
        lab.sh("c1", "systemctl restart k3s")
        assert lab.loaded("c1")["server_files"] == {"audit-policy": audit}
        # A broken policy ends a k3s server (kube-apiserver runs in its process): restarted, never up.
        lab.sh("c1", f"echo 'kind: NotAPolicy' > {audit}")
        restarts = lab.unit("c1")["NRestarts"]
        lab.sh("c1", "systemctl restart --no-block k3s")
        wait_until(lambda: lab.unit("c1")["NRestarts"] > restarts, "a restart by systemd", timeout=20)
        assert lab.unit("c1")["ActiveState"] != "active"
    finally:
        lab.sh("c1", f"cp /root/config.yaml.good {config} && rm -f {audit} && systemctl restart k3s")
    lab.wait_node("c1", "True")


def test_a_stopped_engine_posts_nothing_until_the_grace_period_turns_its_node_unknown(lab):
    renewed = lab.lease_renewed("w2")
    assert renewed is not None, "a running kubelet renews its Lease"
    # 15 s instead of 40 s: to watch the transition without waiting for the real grace period (longer
    # than the kubelet's 10 s Lease renewal, or running nodes would flap).
    with lab.node_grace(15):
        lab.sh("w2", "systemctl stop k3s-agent")
        stopped_lease = lab.lease_renewed("w2")
        try:
            assert lab.node_ready("w2") == "True", "a stopped kubelet posts no NotReady"
            lab.wait_node("w2", "Unknown", timeout=30)
            assert lab.lease_renewed("w2") == stopped_lease, "a stopped kubelet renews nothing"
        finally:
            lab.sh("w2", "systemctl start k3s-agent")
    lab.wait_node("w2", "True", timeout=10)
    # The restarted kubelet posts Ready and starts renewing its Lease, in whichever order comes first.
    deadline = time.monotonic() + 15
    while lab.lease_renewed("w2") <= renewed and time.monotonic() < deadline:
        time.sleep(0.2)
    assert lab.lease_renewed("w2") > renewed, "the restarted kubelet renews its Lease"


def test_killall_script_stops_the_engine(lab):
    lab.sh("w1", "/usr/local/bin/k3s-killall.sh")
    try:
        assert lab.sh("w1", "systemctl is-active k3s-agent", check=False).stdout.strip() != "active"
    finally:
        lab.sh("w1", "systemctl start k3s-agent")
    lab.wait_node("w1", "True")


def test_controller_has_an_admin_kubeconfig_that_reaches_the_api_through_it(lab, tmp_path):
    kubeconfig = lab.sh("c1", "cat /etc/rancher/k3s/k3s.yaml").stdout
    assert lab.sh("c1", "stat -c %a /etc/rancher/k3s/k3s.yaml").stdout.strip() == "600"
    assert "https://127.0.0.1:6443" in kubeconfig
    local = tmp_path / "admin.yaml"
    local.write_text(kubeconfig.replace("127.0.0.1", lab.hosts["c1"].address))
    nodes = subprocess.run(
        ["kubectl", "--kubeconfig", str(local), "get", "nodes", "-o", "name"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert nodes.returncode == 0, nodes.stderr
    assert sorted(nodes.stdout.split()) == [f"node/{n}" for n in sorted(lab.hosts)]
    # The API on a controller is down while its engine is: the relay lives and dies with it.
    lab.sh("c1", "systemctl stop k3s")
    try:
        down = subprocess.run(
            ["kubectl", "--kubeconfig", str(local), "--request-timeout=3s", "get", "nodes"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert down.returncode != 0
    finally:
        lab.sh("c1", "systemctl start k3s")
    lab.wait_node("c1", "True")


def chart_config(name: str) -> str:
    return (
        "apiVersion: helm.cattle.io/v1\nkind: HelmChartConfig\n"
        f"metadata:\n  name: {name}\n  namespace: kube-system\n"
        "spec:\n  valuesContent: |-\n    replicas: 2\n"
    )


def test_manifests_are_applied_as_the_deploy_controller_does(lab):
    """Polled without a restart; one AddOn per file, named up to the first dot; dotfiles and files
    with a .skip beside them ignored; removing a file deletes nothing (real-engines.md)."""
    directory = "/var/lib/rancher/k3s/server/manifests"
    starts = lab.starts("c1")

    def objects(plural: str) -> list[str]:
        group = "k3s.cattle.io" if plural == "addons" else "helm.cattle.io"
        found = lab.custom.list_namespaced_custom_object(group, "v1", "kube-system", plural)["items"]
        return sorted(i["metadata"]["name"] for i in found)

    files = {
        "traefik-config.v2.yaml": chart_config("traefik"),
        ".hidden.yaml": chart_config("hidden"),
        "skipped.yaml": chart_config("skipped"),
        "skipped.yaml.skip": "",
        "notes.txt": chart_config("notes"),
    }
    for name, content in files.items():
        lab.sh("c1", f"printf '%s' '{content}' > {directory}/{name}")
    try:
        wait_until(lambda: "traefik-config" in objects("addons"), "the manifest to be applied", timeout=40)
        assert objects("helmchartconfigs") == ["traefik"]
        # traefik: the packaged chart's own manifest, which the engine writes at every start.
        assert objects("addons") == ["traefik", "traefik-config"]
        item = lab.custom.get_namespaced_custom_object(
            "helm.cattle.io", "v1", "kube-system", "helmchartconfigs", "traefik"
        )
        assert item["spec"]["valuesContent"] == "replicas: 2"
        # helm-controller's answer: a helm-install job for the packaged HelmChart whose pod template carries
        # the hash of the chart's values and the config's (helm-controller pkg/controllers/chart, hashObjects).
        chart = lab.custom.get_namespaced_custom_object("helm.cattle.io", "v1", "kube-system", "helmcharts", "traefik")
        job = lab.kubectl("get", "job", "-n", "kube-system", "helm-install-traefik", "-o", "json").stdout
        annotations = json.loads(job)["spec"]["template"]["metadata"]["annotations"]
        digest = hashlib.sha256(
            b"values-01_HelmChart.yaml"
            + base64.b64encode(chart["spec"]["valuesContent"].encode())
            + b"values-10_HelmChartConfig.yaml"
            + base64.b64encode(b"replicas: 2")
        ).hexdigest()
        assert annotations["helmcharts.helm.cattle.io/configHash"] == f"SHA256={digest.upper()}"
        lab.sh("c1", f"rm -f {directory}/traefik-config.v2.yaml")
        lab.sh("c1", f"printf '%s' '{chart_config('marker')}' > {directory}/marker.yaml")
        wait_until(lambda: "marker" in objects("addons"), "a later scan", timeout=40)
        assert "traefik" in objects("helmchartconfigs"), "removing a manifest file deleted its objects"
        assert lab.starts("c1") == starts
    finally:
        lab.sh("c1", f"cd {directory} && rm -f {' '.join(files)} marker.yaml")
        for plural, group, names in (
            ("helmchartconfigs", "helm.cattle.io", ("traefik", "marker")),
            ("addons", "k3s.cattle.io", ("traefik-config", "marker")),
        ):
            for name in names:
                with contextlib.suppress(ApiException):  # not there
                    lab.custom.delete_namespaced_custom_object(group, "v1", "kube-system", plural, name)
        for name in ("marker",):
            lab.kubectl("delete", "job", "-n", "kube-system", f"helm-install-{name}", "--ignore-not-found", check=False)


def test_kubectl_lists_nodes_ready(lab):
    out = lab.kubectl("get", "nodes").stdout.splitlines()
    assert out[0].split()[:2] == ["NAME", "STATUS"]
    rows = {line.split()[0]: line.split()[1] for line in out[1:]}
    assert rows == {name: "Ready" for name in lab.hosts}


def test_kubectl_label_cordon_and_uncordon(lab):
    lab.kubectl("label", "node", "w1", "node-role.kubernetes.io/infrastructure=true")
    assert lab.core.read_node("w1").metadata.labels["node-role.kubernetes.io/infrastructure"] == "true"
    lab.kubectl("label", "node", "w1", "node-role.kubernetes.io/infrastructure-")
    assert "node-role.kubernetes.io/infrastructure" not in lab.core.read_node("w1").metadata.labels
    lab.kubectl("cordon", "w1")
    assert lab.core.read_node("w1").spec.unschedulable is True
    lab.kubectl("uncordon", "w1")
    assert not lab.core.read_node("w1").spec.unschedulable


def test_drain_is_refused_under_a_pod_disruption_budget_and_succeeds_without(lab):
    def pods_on(node: str, app: str) -> list[str]:
        pods = lab.core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}").items
        return [p.metadata.name for p in pods if (p.metadata.labels or {}).get("app") == app]

    assert pods_on("w2", "web"), "the seeded ReplicaSet should have a pod on w2"
    lab.policy.create_namespaced_pod_disruption_budget(
        "default",
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web-all"},
            "spec": {"minAvailable": "100%", "selector": {"matchLabels": {"app": "web"}}},
        },
    )
    try:
        refused = lab.kubectl(
            "drain", "w2", "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=6s", check=False
        )
        assert refused.returncode != 0
        assert "global timeout reached" in refused.stderr or "disruption budget" in refused.stderr
        assert pods_on("w2", "web"), "a refused eviction must leave the pod in place"
        status = lab.policy.read_namespaced_pod_disruption_budget("web-all", "default").status
        assert status.disruptions_allowed == 0
    finally:
        lab.policy.delete_namespaced_pod_disruption_budget("web-all", "default")
    try:
        drained = lab.kubectl("drain", "w2", "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=30s")
        assert "node/w2 drained" in drained.stdout
        assert pods_on("w2", "web") == []
        assert pods_on("w2", "node-agent"), "DaemonSet pods stay on a drained node"
        assert lab.core.read_node("w2").spec.unschedulable is True
    finally:
        lab.kubectl("uncordon", "w2")


def test_a_started_engine_leaves_evidence_of_what_it_loaded_and_a_lab_switch_keeps_the_previous_start(lab):
    """real-engines.md, "What a running engine shows": the node-args / node-config-hash annotations (k3s
    pkg/nodeconfig) and containerd's hosts.toml per mirrored registry (k3s pkg/agent/containerd), both
    derived from what the engine loaded at start. /etc/cargoship-lab/keep-previous-config makes the engine
    keep its previous start's configuration, as an engine that ignores a file would (issue 29)."""

    registries = "/etc/rancher/k3s/registries.yaml"
    certs = "/var/lib/rancher/k3s/agent/etc/containerd/certs.d"
    dropin = "/etc/rancher/k3s/config.yaml.d/60-evidence.yaml"

    def annotations() -> dict:
        return lab.core.read_node("w1").metadata.annotations or {}

    lab.sh("w1", f"cp -a {registries} /root/registries.good 2>/dev/null || true")
    try:
        lab.sh(
            "w1",
            f"mkdir -p {dropin.rsplit('/', 1)[0]} && printf 'node-label: [tier=evidence]\\ntoken: s3cr3t\\n' > {dropin} && "
            f"printf 'mirrors:\\n  docker.io:\\n    endpoint: [\"https://mirror.example:5000\"]\\n' > {registries} && "
            "systemctl restart k3s-agent",
        )
        lab.wait_node("w1", "True")
        args = json.loads(annotations()["k3s.io/node-args"])
        assert args[0] == "agent" and "tier=evidence" in args
        assert "s3cr3t" not in json.dumps(annotations()) and args[args.index("--token") + 1] == "********"
        first_hash = annotations()["k3s.io/node-config-hash"]
        toml = lab.sh("w1", f"cat {certs}/docker.io/hosts.toml").stdout
        assert toml.startswith("# File generated by k3s. DO NOT EDIT.")
        assert '[host."https://mirror.example:5000/v2"]' in toml

        # With the switch, new files are not loaded: the evidence stays that of the previous start.
        lab.sh(
            "w1",
            f"touch /etc/cargoship-lab/keep-previous-config && rm -f {dropin} && "
            f"printf 'mirrors:\\n  quay.io:\\n    endpoint: [\"https://q.example\"]\\n' > {registries} && "
            "systemctl restart k3s-agent",
        )
        lab.wait_node("w1", "True")
        assert annotations()["k3s.io/node-config-hash"] == first_hash
        assert lab.sh("w1", f"test -e {certs}/quay.io/hosts.toml", check=False).returncode != 0

        # Without it, the next start loads the files: the generated directory of a registry no longer
        # listed goes, the new one comes, the hash changes.
        lab.sh("w1", "rm -f /etc/cargoship-lab/keep-previous-config && systemctl restart k3s-agent")
        lab.wait_node("w1", "True")
        assert annotations()["k3s.io/node-config-hash"] != first_hash
        assert "tier=evidence" not in json.loads(annotations()["k3s.io/node-args"])
        assert lab.sh("w1", f"test -e {certs}/docker.io", check=False).returncode != 0
        assert "https://q.example/v2" in lab.sh("w1", f"cat {certs}/quay.io/hosts.toml").stdout
    finally:
        lab.sh(
            "w1",
            f"rm -f /etc/cargoship-lab/keep-previous-config {dropin} && "
            f"if [ -e /root/registries.good ]; then mv /root/registries.good {registries}; else rm -f {registries}; fi && "
            "systemctl restart k3s-agent",
        )
        lab.wait_node("w1", "True")
