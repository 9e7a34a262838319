"""What the lab tests share: running the command, waiting, and common cluster conditions."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

import labctl
import yaml

REPO = Path(__file__).resolve().parents[2]


def cargoship(*args: str, timeout: float = 900, env: dict | None = None) -> subprocess.CompletedProcess:
    """The real command, as a user runs it, without a terminal to ask on (``env``: added variables)."""
    return subprocess.run(
        ["cargoship", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
    )


def start_cargoship(*args: str, env: dict | None = None) -> subprocess.Popen:
    """The real command in the background, for tests that act while it runs (``env``: added variables)."""
    return subprocess.Popen(
        ["cargoship", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


def desired_inventory(lab, directory: Path, **overrides) -> Path:
    """The lab's hosts with the example desired state (examples/group_vars/all.yml), changed by ``overrides``."""
    (directory / "group_vars").mkdir(parents=True, exist_ok=True)
    shutil.copy(lab.inventory, directory / "hosts.yml")
    state = yaml.safe_load((REPO / "examples" / "group_vars" / "all.yml").read_text())
    state.update(overrides)
    (directory / "group_vars" / "all.yml").write_text(yaml.safe_dump(state))
    return directory


def lock_keepers() -> list[str]:
    """The lock keepers of runs this test process started (their environment names this process's lab
    slot), not those of a lab in another slot."""
    slot = f"CARGOSHIP_LAB_SLOT={labctl.SLOT.number}".encode()
    found = subprocess.run(["pgrep", "-f", "_lock_keeper.py"], capture_output=True, text=True, check=False)
    mine = []
    for pid in found.stdout.split():
        try:
            environment = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue  # ended meanwhile
        if slot in environment:  # tests/conftest.py sets the slot for every run a test starts
            mine.append(pid)
    return mine


def wait_for(condition, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)


def engine_files(lab, name: str) -> str:
    """Checksums of the files the engine reads at start on one host. Chart values are left out: they are
    written in place, whole, before any node is drained, and are a finished change of their own."""
    return lab.sh(
        name,
        "cd / && find etc/rancher var/lib/rancher/k3s/server -type f -not -path '*/lab/*' "
        "-not -path '*/manifests/*' -not -name k3s.yaml -exec sha256sum {} + | sort",
    ).stdout


@contextmanager
def budget_refusing_every_eviction(lab, name: str = "hold", holding: tuple[str, ...] = ()):
    """A PodDisruptionBudget that keeps every web pod: drains block until it is gone.

    ``holding``: the nodes whose drain it must hold. A drain of a node without a web pod has nothing to
    evict and ends at once, and a lab shared by a module's tests may have one: a drained node's pods move
    to the others, and a ReplicaSet never moves them back. Such a node gets a web pod of a ReplicaSet of
    its own (bound to it by ``nodeName``, counted by the budget at its replica count, as the disruption
    controller does: one pod more of the web ReplicaSet would let the budget allow one eviction), removed
    with its pod when the block ends."""
    placed: list[str] = []
    try:
        for node in holding:
            if not web_pods_on(lab, node):
                placed.append(hold_web_pod(lab, node))
                wait_for(lambda node=node: web_pods_on(lab, node), f"the held web pod on {node}", 30)
        lab.policy.create_namespaced_pod_disruption_budget(
            "default",
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": name},
                "spec": {"minAvailable": "100%", "selector": {"matchLabels": {"app": "web"}}},
            },
        )
        yield
    finally:
        if any(p.metadata.name == name for p in lab.policy.list_namespaced_pod_disruption_budget("default").items):
            lab.policy.delete_namespaced_pod_disruption_budget(name, "default")
        for replica_set in placed:
            # As the garbage collector would: the ReplicaSet, then its pods.
            lab.apps.delete_namespaced_replica_set(replica_set, "default")
            for pod in lab.core.list_namespaced_pod("default", label_selector=f"held={replica_set}").items:
                lab.core.delete_namespaced_pod(pod.metadata.name, "default", grace_period_seconds=0)


def web_pods_on(lab, node: str) -> list[str]:
    """The running web pods on ``node``: those a budget protects (an unready pod may always be evicted)."""
    pods = lab.core.list_namespaced_pod("default", label_selector="app=web").items
    return [
        p.metadata.name
        for p in pods
        if p.spec.node_name == node and p.status.phase == "Running" and not p.metadata.deletion_timestamp
    ]


def hold_web_pod(lab, node: str) -> str:
    """A ReplicaSet of one web pod bound to ``node``: its name."""
    web = lab.apps.read_namespaced_replica_set("web", "default")
    name = f"web-held-{node}"
    labels = {"app": "web", "held": name}
    template = lab.apps.api_client.sanitize_for_serialization(web.spec.template.spec)
    lab.apps.create_namespaced_replica_set(
        "default",
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": name},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": {**template, "nodeName": node}},
            },
        },
    )
    return name


@contextmanager
def disk_full(lab, name: str, directory: str):
    """``directory`` on host ``name`` becomes a small file system holding a copy of its files and
    nothing to spare, until the block ends (then the host's own directory shows through again)."""
    pid = labctl.podman("inspect", "--format", "{{.State.Pid}}", lab.hosts[name].container).stdout.strip()

    def inside(command: str) -> None:
        subprocess.run(["nsenter", "-t", pid, "-m", "sh", "-c", command], check=True, capture_output=True, text=True)

    inside(
        f"mkdir -p /run/full-disk && cp -a {directory}/. /run/full-disk/ && "
        f"mount -t tmpfs -o size=256k,mode=0700 full-disk {directory} && cp -a /run/full-disk/. {directory}/ && "
        f"(dd if=/dev/zero of={directory}/.filler bs=4k 2>/dev/null || true)"
    )
    try:
        yield
    finally:
        inside(f"umount {directory} && rm -rf /run/full-disk")


def converged_lab(lab_manager, directory, **shape):
    """A lab of this shape whose hosts hold the example desired state, and that inventory."""
    lab = lab_manager.get(**shape)
    inventory = desired_inventory(lab, directory)
    converged = cargoship("engine-config-sync", "-i", str(inventory), "--confirm")
    assert converged.returncode == 0, converged.stdout + converged.stderr
    return lab, inventory


KEEP_PREVIOUS = "/etc/cargoship-lab/keep-previous-config"
EXAMPLE = yaml.safe_load((REPO / "examples" / "group_vars" / "all.yml").read_text())


def stamp_of(lab, name: str) -> dict | None:
    text = (lab.core.read_node(name).metadata.annotations or {}).get("cargoship.io/proven")
    return json.loads(text) if text else None


def run_keeping_previous(lab, host: str, inventory) -> str:
    """A real run while ``host``'s engine keeps its previous start's configuration; it must fail. Its output."""
    lab.sh(host, f"touch {KEEP_PREVIOUS}")
    try:
        result = cargoship("engine-config-sync", "-i", str(inventory), "--confirm", timeout=600)
    finally:
        lab.sh(host, f"rm -f {KEEP_PREVIOUS}")
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "Previous configuration restored" in output
    return output


def proven_lines(report: dict, host: str) -> list[str]:
    return [
        line
        for phase in report["phases"]
        if phase["name"] in ("sync_controller", "sync_worker")
        for line in phase["hosts"].get(host, {}).get("proven", [])
    ]


KUBELET_DOWN = "/etc/cargoship-lab/kubelet-down"


def replace_registry(lab, names, old: str, new: str) -> None:
    for name in names:
        lab.sh(name, f"sed -i 's/{old}/{new}/' /etc/rancher/{lab.engine}/registries.yaml")


def drift(lab, *names: str) -> None:
    replace_registry(lab, names, "registry.internal.example", "drifted.example")


def undrift(lab, *names: str) -> None:
    """Undo ``drift`` on hosts no run wrote to since: their files are again what their engines run (the
    engine never restarted on the drifted file), without a converging run and its restarts."""
    replace_registry(lab, names, "drifted.example", "registry.internal.example")
