"""A reviewed plan applied exactly, and the least disruption each change needs: a restart in place keeps every
pod running; a window check may refuse a node; a plan that is stale, edited or not the reviewed one is refused
before anything is changed, and a node that changed after the run's first check is refused before it is
touched."""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess

import pytest
from helpers import EXAMPLE, REPO, cargoship, converged_lab, desired_inventory, engine_files, wait_for

pytestmark = pytest.mark.lab

REGISTRIES = "/etc/rancher/k3s/registries.yaml"
HOSTS = ("c1", "w1", "w2")
PASSWORD = EXAMPLE["cargoship_registries"]["configs"]["registry.internal.example:5000"]["auth"]["password"]


@pytest.fixture(scope="module")
def plan_fleet(lab_manager, tmp_path_factory):
    return converged_lab(lab_manager, tmp_path_factory.mktemp("plan"), hosts=3, controllers=1, engine="k3s")


def with_mirror(endpoint: str) -> dict:
    """The example registries with one more mirror endpoint: a change every node restarts for."""
    registries = copy.deepcopy(EXAMPLE["cargoship_registries"])
    registries["mirrors"]["docker.io"]["endpoint"].append(endpoint)
    return registries


def pods(lab) -> dict:
    """Every pod of the nodes with what identifies it and its container: evicted, it is gone (a new uid);
    its container restarted, another containerID and restart count (the kubelet stand-in's record)."""
    found = {}
    for pod in lab.core.list_pod_for_all_namespaces().items:
        status = (pod.status.container_statuses or [None])[0]
        found[(pod.metadata.namespace, pod.metadata.name)] = (
            pod.metadata.uid,
            pod.spec.node_name,
            pod.status.start_time,
            status and status.container_id,
            status and status.restart_count,
        )
    return found


def containers_reported(lab) -> bool:
    return all(entry[3] for entry in pods(lab).values())


def cordoned(lab) -> list:
    return [n.metadata.name for n in lab.core.list_node().items if n.spec.unschedulable]


def no_lock_anywhere(lab) -> bool:
    return all(lab.sh(h, "test -e /var/lib/cargoship/lock.json", check=False).returncode == 1 for h in HOSTS)


def digest_printed(output: str) -> str:
    found = re.search(r"its digest: (sha256:[0-9a-f]{64})", output)
    assert found, output
    return found.group(1)


def test_a_window_check_refuses_a_node_and_a_restart_in_place_keeps_every_pod_running(plan_fleet, tmp_path):
    lab, _converged = plan_fleet
    freeze = 'test "$CARGOSHIP_NODE" != w2 || { echo "change freeze on w2" >&2; exit 1; }'
    inventory = desired_inventory(
        lab,
        tmp_path / "inv",
        cargoship_registries=with_mirror("https://mirror-b.internal.example"),
        cargoship_restart="in_place",
        cargoship_pause_between_nodes=1,
        cargoship_hooks={
            "sync_worker.window.worker": [{"name": "change freeze", "run_on": "control", "command": freeze}]
        },
    )
    dry = cargoship("engine-config-sync", "-i", str(inventory), "--dry-run")
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert "restart k3s-agent in place (registries changed; cargoship_restart: in_place, so no drain" in dry.stdout
    assert "would run hook sync_worker.window.worker: change freeze" in dry.stdout
    assert "evict" not in dry.stdout, "a restart in place drains nothing"
    wait_for(lambda: containers_reported(lab), "the kubelets to report every pod's container", 30)
    before = pods(lab)
    untouched = engine_files(lab, "w2")
    starts = {name: lab.starts(name) for name in HOSTS}

    result = cargoship("engine-config-sync", "-i", str(inventory), "--confirm", timeout=600)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "w2: the window check refused this node (change freeze on w2). Nothing was changed on it" in output
    # c1 and w1 restarted on their new files, in place; w2 was not touched.
    assert lab.starts("c1") > starts["c1"] and lab.starts("w1") > starts["w1"]
    assert "mirror-b.internal.example" in lab.sh("w1", f"cat {REGISTRIES}").stdout
    assert engine_files(lab, "w2") == untouched and lab.starts("w2") == starts["w2"]
    # No pod was evicted or restarted: the same pods, on the same nodes, with the same containers.
    assert pods(lab) == before
    assert cordoned(lab) == [] and no_lock_anywhere(lab)


def test_a_reviewed_plan_is_applied_exactly_and_refused_when_stale_edited_or_not_the_reviewed_one(plan_fleet, tmp_path):
    lab, _converged = plan_fleet
    inventory = desired_inventory(
        lab,
        tmp_path / "inv",
        cargoship_registries=with_mirror("https://mirror-c.internal.example"),
        cargoship_restart="in_place",
    )

    def plan(name: str) -> tuple:
        path = tmp_path / name
        dry = cargoship("engine-config-sync", "-i", str(inventory), "--dry-run", "--plan-out", str(path))
        assert dry.returncode == 0, dry.stdout + dry.stderr
        digest = digest_printed(dry.stdout)
        assert json.loads(path.read_text())["digest"] == digest
        return path, digest

    first, digest = plan("first.plan")
    text = first.read_text()
    assert PASSWORD not in text
    planned = json.loads(text)["plan"]
    assert {h: planned["hosts"][h]["restart"] for h in HOSTS} == dict.fromkeys(HOSTS, "in_place")
    assert planned["nodes"] == ["c1", "w1", "w2"]

    # A plan edited by hand, or another than the reviewed one: refused by the command, no host contacted.
    edited = tmp_path / "edited.plan"
    edited.write_text(text.replace('"in_place"', '"drain"', 1))
    refused = cargoship("engine-config-sync", "-i", str(inventory), "--plan", str(edited), "--confirm")
    assert refused.returncode == 1 and "was changed since it was written" in refused.stderr, refused.stderr
    other = cargoship(
        "engine-config-sync",
        "-i",
        str(inventory),
        "--plan",
        str(first),
        "--expect-digest",
        "sha256:" + "0" * 64,
        "--confirm",
    )
    assert other.returncode == 1 and f"is not the reviewed plan: its digest is {digest}" in other.stderr

    # A file changed on w1 after the review: the plan is stale. ansible-playbook users name the plan file.
    lab.sh("w1", f"echo '# changed after the review' >> {REGISTRIES}")
    files = {name: engine_files(lab, name) for name in HOSTS}
    starts = {name: lab.starts(name) for name in HOSTS}
    stale = subprocess.run(
        [
            "ansible-playbook",
            "-i",
            str(inventory),
            "cargoship.engine.engine_config_sync",
            "-e",
            f"cargoship_plan_file={first}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert stale.returncode != 0, stale.stdout[-3000:]
    assert f"is stale: w1: {REGISTRIES} changed since the plan. Nothing was changed." in stale.stdout
    assert {name: engine_files(lab, name) for name in HOSTS} == files
    assert {name: lab.starts(name) for name in HOSTS} == starts
    assert cordoned(lab) == [] and no_lock_anywhere(lab)

    # A node changed after the run's first check: refused at its turn, before it is touched. (A hook after
    # c1's restart changes w2's file behind the run's back.)
    second, _digest = plan("second.plan")
    behind = tmp_path / "behind.yml"
    behind.write_text(
        "- name: Change w2's registries file behind the run's back\n"
        f"  ansible.builtin.shell: echo '# changed during the run' >> {REGISTRIES}\n"
        "  delegate_to: w2\n  become: true\n  changed_when: true\n"
    )
    hooked = desired_inventory(
        lab,
        tmp_path / "hooked",
        cargoship_registries=with_mirror("https://mirror-c.internal.example"),
        cargoship_restart="in_place",
        cargoship_hooks={"sync_controller.after.controller": [{"name": "meddle", "tasks": str(behind)}]},
    )
    starts = {name: lab.starts(name) for name in HOSTS}
    meddled = cargoship("engine-config-sync", "-i", str(hooked), "--plan", str(second), "--confirm", timeout=600)
    output = meddled.stdout + meddled.stderr
    assert meddled.returncode == 1, output
    assert f"w2 is no longer as the plan {_digest} found it: {REGISTRIES} changed since the plan." in output
    assert "It was not touched; the rollout stopped before it." in output
    assert lab.starts("c1") > starts["c1"] and lab.starts("w1") > starts["w1"] and lab.starts("w2") == starts["w2"]
    assert "mirror-c.internal.example" not in lab.sh("w2", f"cat {REGISTRIES}").stdout

    # Reviewed again, then applied as the AWX job template pair does (docs/awx): the plan job (Check) writes
    # the plan and hands it to the workflow; after the approval, the apply job (Run) applies the plan the
    # workflow carries, with the digest the approver read. Exactly that plan, its digest in the report; every
    # pod kept running.
    plan_path = tmp_path / "awx.plan"
    planned = playbook(inventory, "docs/awx/plan.yml", "--check", "-e", f"fleet_plan_path={plan_path}")
    assert planned.returncode == 0, planned.stdout[-3000:]
    final = json.loads(plan_path.read_text())
    assert [h for h in HOSTS if final["plan"]["hosts"][h]["changes"]] == ["w2"]
    workflow = tmp_path / "workflow.json"  # what the workflow passes on: the artifact, the survey's digest
    approved = tmp_path / "approved.plan"
    workflow.write_text(
        json.dumps(
            {
                "fleet_plan": plan_path.read_text(),
                "fleet_plan_path": str(approved),
                "cargoship_plan_digest": final["digest"],
            }
        )
    )
    before = pods(lab)
    report = tmp_path / "report.json"
    applied = playbook(
        inventory, "docs/awx/apply.yml", "-e", f"@{workflow}", env={"CARGOSHIP_REPORT_JSON": str(report)}
    )
    assert applied.returncode == 0, applied.stdout[-3000:]
    assert json.loads(report.read_text())["plan"] == {"digest": final["digest"], "file": str(approved), "applied": True}
    assert pods(lab) == before
    converged = cargoship("engine-config-sync", "-i", str(inventory), "--dry-run", "--detailed-exitcode")
    assert converged.returncode == 0, converged.stdout + converged.stderr


def playbook(inventory, name: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["ansible-playbook", "-i", str(inventory), name, *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=REPO,
        env={**os.environ, **(env or {})},
    )
