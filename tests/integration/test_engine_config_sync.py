"""engine-config-sync end to end on the lab: dry run, real run, idempotence, one report for both entry points."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from helpers import cargoship, drift, undrift, wait_for

pytestmark = pytest.mark.lab

REPO = Path(__file__).resolve().parents[2]
CANARY = "demo-registry-password-c4n4ry"
WATCHED = "/etc/rancher /var/lib/rancher/{engine}/server /var/lib/cargoship"


def snapshot(lab) -> dict:
    """Every watched file with its content hash and mtime, plus engine service state, per host."""
    state = {}
    for name in lab.hosts:
        files = lab.sh(
            name,
            f"find {WATCHED.format(engine=lab.engine)} -type f -not -path '*/lab/*' -printf '%p %T@ ' "
            "-exec sha256sum {} \\; 2>/dev/null | sort",
            check=False,
        ).stdout
        services = lab.sh(name, f"systemctl show -p MainPID,ActiveState {lab.service(name)}").stdout
        state[name] = (files, services, lab.starts(name))
    return state


@pytest.fixture(scope="module")
def fleet(lab_manager):
    lab = lab_manager.get(hosts=3, controllers=1, engine="k3s", fresh=True)
    group_vars = lab.state / "group_vars"
    group_vars.mkdir(exist_ok=True)
    shutil.copy(REPO / "examples" / "group_vars" / "all.yml", group_vars / "all.yml")
    return lab


def phase(report: dict, name: str) -> dict:
    return next(p for p in report["phases"] if p["name"] == name)


def test_dry_run_reports_the_work_and_changes_nothing(fleet, tmp_path):
    before = snapshot(fleet)
    result = cargoship(
        "engine-config-sync",
        "-i",
        str(fleet.inventory),
        "--dry-run",
        "--detailed-exitcode",
        "--report-json",
        str(tmp_path / "r.json"),
        "-vvvv",
    )
    assert result.returncode == 2, result.stdout + result.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["dry_run"] is True and report["work_found"] is True
    assert [p["name"] for p in report["phases"]] == [
        "connect",
        "detect_os",
        "lock",
        "host_facts",
        "validate_hosts",
        "engine_facts",
        "sync_controller",
        "sync_worker",
        "kubeconfig",
        "label_nodes",
        "unlock",
        "disconnect",
    ]
    for read_only in ("connect", "detect_os", "host_facts", "validate_hosts", "engine_facts"):
        assert phase(report, read_only)["status"] == "ran", read_only
    assert phase(report, "unlock")["status"] == "unassessed"
    controller = phase(report, "sync_controller")
    assert controller["status"] == "would run" and set(controller["hosts"]) == {"c1"}
    files = {c["file"] for c in controller["hosts"]["c1"]["changes"] if isinstance(c, dict)}
    assert "/etc/rancher/k3s/registries.yaml" in files
    assert "/var/lib/rancher/k3s/server/cargoship-audit-policy.yaml" in files
    worker_changes = phase(report, "sync_worker")["hosts"]["w1"]["changes"]
    assert any(isinstance(c, str) and c.startswith("drain and restart k3s-agent (") for c in worker_changes), (
        worker_changes
    )
    # Audit and pod-security files exist on controllers only.
    assert not any("audit" in c["file"] for c in worker_changes if isinstance(c, dict))
    assert CANARY not in result.stdout + result.stderr + (tmp_path / "r.json").read_text()
    assert snapshot(fleet) == before, "a dry run changed a host"


def test_check_mode_report_of_ansible_playbook_equals_the_cli_report(fleet, tmp_path):
    cli = cargoship(
        "engine-config-sync", "-i", str(fleet.inventory), "--dry-run", "--report-json", str(tmp_path / "cli.json")
    )
    assert cli.returncode == 0, cli.stderr
    playbook = subprocess.run(
        ["ansible-playbook", "-i", str(fleet.inventory), "cargoship.engine.engine_config_sync", "--check", "--diff"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, "CARGOSHIP_REPORT_JSON": str(tmp_path / "pb.json")},
    )
    assert playbook.returncode == 0, playbook.stdout[-3000:]
    by_playbook, by_command = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("pb", "cli"))
    assert by_playbook.pop("run_id") and by_command.pop("run_id")  # each run has its own
    assert by_playbook == by_command
    assert "sync_controller  reported, not run          would run" in playbook.stdout


# Modules whose read-only calls host_survey answers, and the phases' declared reads (phase_read).
SURVEYED = {f"cargoship.engine.{m}" for m in ("host_info", "host_lock", "engine_info", "engine_config", "phase_read")}


def test_a_dry_run_goes_to_each_host_once_and_assesses_each_play_once_from_that_round(fleet):
    from cargoship_runner.runner import RunOptions, run_playbook

    rounds: dict[str, list[str]] = {}
    answered: dict[str, list[str]] = {}
    hosts_of_task: dict[str, set[str]] = {}

    def on_event(event: dict) -> bool:
        data = event.get("event_data") or {}
        if event.get("event") not in ("runner_on_ok", "runner_on_failed", "runner_on_skipped") or not data.get("host"):
            return True
        action, result = data.get("resolved_action") or data.get("task_action"), data.get("res") or {}
        if action != "ansible.builtin.meta":  # handled by Ansible itself, no module or action run on a host
            hosts_of_task.setdefault(data.get("task", ""), set()).add(data["host"])
        delegated = (result.get("_ansible_delegated_vars") or {}).get("ansible_host")
        if action == "cargoship.engine.host_survey" or (action in SURVEYED and delegated is None):
            rounds.setdefault(data["host"], []).append(action)
        for item in result.get("cargoship_assessed") or []:
            if item["result"].get("answered_by") == "host_survey":
                answered.setdefault(item["host"], []).append(item["phase"])
        return True

    outcome = run_playbook(RunOptions(playbook="engine_config_sync", inventory=fleet.inventory, dry_run=True), on_event)
    assert outcome.rc == 0, outcome.ansible_errors
    # One round to each host (the survey), and no other task on each host: the connect phase's include and its
    # survey are the only tasks that ran for more than one host; every other ran once for its play.
    assert rounds == {name: ["cargoship.engine.host_survey"] for name in fleet.hosts}
    assert [task for task, hosts in hosts_of_task.items() if len(hosts) > 1] == [
        "Run the preparation phases",
        "Open the SSH session to every host and survey it once for the read-only phases",
    ]
    # Every read a phase declares was answered from the survey, in the play's assessment on the control host:
    # the OS, the lock, the host facts, the engine, the comparison, the clean-up.
    for name in fleet.hosts:
        sync = "sync_controller" if name in fleet.controllers else "sync_worker"
        assert answered[name] == ["detect_os", "lock", "host_facts", "engine_facts", sync, "disconnect"], name
    assert phase(outcome.report, "sync_controller")["hosts"]["c1"]["status"] == "would run"


class HostRounds:
    """The tasks of a run that went to a host (a module run there, not answered on the control host), by host."""

    def __init__(self) -> None:
        self.of: dict[str, list[str]] = {}
        self.answered: dict[str, dict[str, str | None]] = {}  # host: phase: what answered its read

    def on_event(self, event: dict) -> bool:
        data = event.get("event_data") or {}
        if event.get("event") not in ("runner_on_ok", "runner_on_failed") or not data.get("host"):
            return True
        action, result = data.get("resolved_action") or data.get("task_action") or "", data.get("res") or {}
        if action == "cargoship.engine.phase_read" and data.get("role") == "engine_facts":
            self.answered.setdefault(data["host"], {})["engine_facts"] = result.get("answered_by")
        delegated = (result.get("_ansible_delegated_vars") or {}).get("ansible_host")
        if (action == "cargoship.engine.host_survey" or action in SURVEYED) and delegated is None:
            if not result.get("answered_by"):
                self.of.setdefault(data["host"], []).append(action.rsplit(".", 1)[1])
        return True


def test_real_run_converges_in_order_and_a_second_run_changes_nothing(fleet, tmp_path):
    starts_before = {name: fleet.starts(name) for name in fleet.hosts}
    result = cargoship(
        "engine-config-sync",
        *("-i", str(fleet.inventory), "--confirm", "--report-json", str(tmp_path / "r.json"), "--keep-artifacts"),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert CANARY not in result.stdout + result.stderr
    # Every host's sync wrote and finished: its clean-up was answered by the comparison, no round to the host.
    kept = Path(result.stderr.split("directory is kept in ")[1].split()[0])
    try:
        cleanups = {
            event["event_data"]["host"]: event["event_data"]["res"].get("answered_by")
            for event in map(json.loads, map(Path.read_text, kept.glob("artifacts/*/job_events/*.json")))
            if event["event"] == "runner_on_ok"
            and event["event_data"].get("role") == "disconnect"
            and event["event_data"].get("task_action") == "cargoship.engine.phase_read"
        }
    finally:
        # The lock keeper removes its pid file from the same directory as it ends, maybe while this runs.
        shutil.rmtree(kept, ignore_errors=True)
    assert cleanups == dict.fromkeys(fleet.hosts, "comparison"), cleanups
    for name in fleet.hosts:
        assert fleet.starts(name) == starts_before[name] + 1, f"{name} was not restarted exactly once"
        loaded = fleet.loaded(name)
        assert loaded["registry_mirrors"] == ["docker.io"]
        assert fleet.node_ready(name) == "True"
        assert not fleet.core.read_node(name).spec.unschedulable
        mode = fleet.sh(name, "stat -c '%a %U' /etc/rancher/k3s/registries.yaml").stdout.split()
        assert mode == ["600", "root"]
        leftovers = fleet.sh(name, "find /etc/rancher /var/lib/rancher -name '.cargoship-*'").stdout
        assert leftovers == "", f"staged or temporary files left on {name}"
    assert fleet.loaded("c1")["server_files"] == {
        "audit-policy": "/var/lib/rancher/k3s/server/cargoship-audit-policy.yaml",
        "pod-security": "/var/lib/rancher/k3s/server/cargoship-pod-security.yaml",
    }
    # Controllers first, then workers one at a time (work concurrency 1).
    order = sorted(fleet.hosts, key=lambda n: fleet.loaded(n)["started_at"])
    assert order == ["c1", "w1", "w2"]
    assert fleet.sh("c1", "test -e /var/lib/cargoship/lock.json", check=False).returncode == 1, "lock not released"
    # The report says what was done to each node in its own words, the stop and start of its engine included.
    done = phase(json.loads((tmp_path / "r.json").read_text()), "sync_worker")["hosts"]["w1"]["changes"]
    words = [c for c in done if isinstance(c, str)]
    assert [w for w in words if w.split()[0] in ("cordon", "stop", "start", "uncordon")] == [
        "cordon",
        "stop k3s-agent",
        "start k3s-agent",
        "uncordon",
    ], done

    def charts() -> list[str]:
        found = fleet.custom.list_namespaced_custom_object("helm.cattle.io", "v1", "kube-system", "helmchartconfigs")
        return [c["metadata"]["name"] for c in found["items"]]

    # The engine's deploy controller picks the chart values up on its next scan (about every 15 s).
    wait_for(lambda: charts() == ["traefik"], "the chart values to be applied", 30)

    # What a write interrupted by a killed run leaves: the converged run still removes it, on that host.
    fleet.sh("w2", "echo half > /etc/rancher/k3s/.cargoship-interrupted")
    from cargoship_runner.runner import RunOptions, run_playbook

    rounds = HostRounds()
    again = run_playbook(RunOptions(playbook="engine_config_sync", inventory=fleet.inventory), rounds.on_event)
    assert again.rc == 0, again.ansible_errors
    report = again.report
    # A converged real run goes to each host four times: its survey, its lock (which reads the engine under it,
    # in the same round), its comparison and its release; w2 once more, to remove what the killed write left.
    reads = ["host_survey", "host_lock", "phase_read", "host_lock"]
    assert rounds.of == {"c1": reads, "w1": reads, "w2": [*reads, "phase_read"]}
    assert {host: rounds.answered[host]["engine_facts"] for host in fleet.hosts} == dict.fromkeys(
        fleet.hosts, "host_lock"
    )
    assert phase(report, "sync_controller")["status"] == "nothing to do"
    assert phase(report, "sync_worker")["status"] == "nothing to do"
    assert fleet.sh("w2", "find /etc/rancher -name '.cargoship-*'").stdout == "", "an interrupted write's file was kept"
    cleaned = phase(report, "disconnect")["hosts"]
    assert cleaned["w2"]["changes"] == [{"file": "/etc/rancher/k3s/.cargoship-interrupted", "action": "remove"}]
    assert not any(cleaned.get(name, {}).get("changes") for name in ("c1", "w1")), cleaned
    assert {name: fleet.starts(name) for name in fleet.hosts} == {n: starts_before[n] + 1 for n in fleet.hosts}


def test_only_the_drifted_node_is_restarted(fleet):
    drift(fleet, "w2")
    starts = {name: fleet.starts(name) for name in fleet.hosts}
    result = cargoship("engine-config-sync", "-i", str(fleet.inventory), "--confirm")
    assert result.returncode == 0, result.stderr
    assert {name: fleet.starts(name) - starts[name] for name in fleet.hosts} == {"c1": 0, "w1": 0, "w2": 1}
    assert "was lost" not in result.stderr, "a node with nothing to restart was reported lost mid-sync"


def test_a_held_lock_stops_the_run_naming_its_holder(fleet):
    # Work to do on every host, so that "nothing was written" below means something.
    drift(fleet, *fleet.hosts)
    fleet.sh(
        "w1",
        'mkdir -p /var/lib/cargoship && echo \'{"run_id": "other-run", "holder": {"user": "alice"}}\' '
        "> /var/lib/cargoship/lock.json",
    )
    before = snapshot(fleet)
    try:
        result = cargoship("engine-config-sync", "-i", str(fleet.inventory), "--confirm")
        assert result.returncode == 4, result.stdout + result.stderr
        assert "locked by run other-run (user=alice" in result.stderr
        # Our own locks on the other hosts were released after the failure.
        assert fleet.sh("c1", "test -e /var/lib/cargoship/lock.json", check=False).returncode == 1
        # Nothing was written or restarted anywhere: files, their times, the engines as they were.
        assert snapshot(fleet) == before
        assert not any(fleet.core.read_node(name).spec.unschedulable for name in fleet.hosts)
    finally:
        fleet.sh("w1", "rm -f /var/lib/cargoship/lock.json")
        undrift(fleet, *fleet.hosts)  # nothing was written: no converging run needed


def test_a_failed_run_releases_its_own_locks_alike_from_the_command_and_from_ansible_playbook(fleet, tmp_path):
    """The playbook releases the locks it took when a phase fails (the command adds nothing), and
    ansible-playbook ends and reports as the command does."""
    held = '{"run_id": "other-run", "holder": {"user": "bob"}}'
    fleet.sh("w2", f"mkdir -p /var/lib/cargoship && echo '{held}' > /var/lib/cargoship/lock.json")

    def locks() -> dict:
        return {
            n: fleet.sh(n, "cat /var/lib/cargoship/lock.json 2>/dev/null || true").stdout.strip() for n in fleet.hosts
        }

    def outcome(report: dict) -> dict:
        return {
            p["name"]: {h: (d["status"], d.get("locked_by")) for h, d in p["hosts"].items()} for p in report["phases"]
        }

    try:
        command = cargoship(
            "engine-config-sync", "-i", str(fleet.inventory), "--confirm", "--report-json", str(tmp_path / "c.json")
        )
        assert command.returncode == 4, command.stdout + command.stderr
        assert "w2 is locked by run other-run (user=bob" in command.stderr
        assert "released this run's locks" not in command.stderr, "the command had to release them itself"
        assert locks() == {"c1": "", "w1": "", "w2": held}, "a lock of this run was left, or another run's taken"
        plain = subprocess.run(
            ["ansible-playbook", "-i", str(fleet.inventory), "cargoship.engine.engine_config_sync"],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
            env={**os.environ, "CARGOSHIP_REPORT_JSON": str(tmp_path / "p.json")},
        )
        assert plain.returncode != 0, plain.stdout[-3000:]
        assert "the run stopped after a failure: w2: locked by run other-run" in plain.stdout
        assert locks() == {"c1": "", "w1": "", "w2": held}
        by_command = json.loads((tmp_path / "c.json").read_text())
        by_playbook = json.loads((tmp_path / "p.json").read_text())
        assert outcome(by_playbook) == outcome(by_command)
        assert outcome(by_command)["lock"]["w2"] == ("failed", "run other-run (user=bob)")
        assert outcome(by_command)["unlock"]["w2"][0] in ("ran", "nothing to do")
        assert outcome(by_command)["sync_worker"] == {}, "nothing after the failed phase ran"
    finally:
        fleet.sh("w2", "rm -f /var/lib/cargoship/lock.json")


@pytest.mark.parametrize(
    ("group_vars", "message"),
    [
        pytest.param(
            "cargoship_registries:\n  mirrors:\n    docker.io:\n      endpont: [https://m.example]\n",
            "cargoship_registries.mirrors[\"docker.io\"].endpont: unknown key (did you mean 'endpoint'?)",
            id="misspelled-key",
        ),
        pytest.param(
            "cargoship_registries:\n  mirrors:\n    docker.io:\n      endpoint: https://m.example\n",
            'cargoship_registries.mirrors["docker.io"].endpoint: expected a list',
            id="wrong-type",
        ),
        pytest.param(
            "cargoship_registries:\n  mirrors:\n    docker.io: [endpoint:\n",
            "group_vars/all.yml, line 4, column 1: malformed YAML",
            id="malformed-yaml",
        ),
        pytest.param(
            "cargoship_chart_values:\n  ../../etc/cron.d/x:\n    values: {}\n",
            'cargoship_chart_values["../../etc/cron.d/x"]: ',
            id="name-escaping-its-directory",
        ),
        pytest.param(
            "cargoship_chart_values:\n  a-b: {namespace: c, values: {}}\n  b: {namespace: c-a, values: {}}\n",
            "collides",
            id="names-colliding-in-the-manifests-directory",
        ),
    ],
)
def test_bad_input_is_rejected_before_any_host_is_contacted(fleet, tmp_path, group_vars, message):
    inventory = tmp_path / "inventory"
    (inventory / "group_vars").mkdir(parents=True)
    shutil.copy(fleet.inventory, inventory / "hosts.yml")
    (inventory / "group_vars" / "all.yml").write_text(group_vars)
    before = snapshot(fleet)
    result = cargoship("engine-config-sync", "-i", str(inventory), "--confirm")
    assert result.returncode == 1, result.stdout + result.stderr
    assert message in result.stdout + result.stderr
    assert "Open the SSH session" not in result.stdout
    assert "lock" not in result.stderr, "no lock was taken, so none should be released or mentioned"
    assert snapshot(fleet) == before


def test_kubeconfig_phase_merges_the_cluster_into_a_local_kubeconfig(fleet, tmp_path):
    local = tmp_path / "config"
    local.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "other",
                "clusters": [{"name": "other", "cluster": {"server": "https://other:6443"}}],
                "users": [{"name": "other", "user": {"token": "keep-me"}}],
                "contexts": [{"name": "other", "context": {"cluster": "other", "user": "other"}}],
            }
        )
    )
    inventory = tmp_path / "inventory"
    (inventory / "group_vars").mkdir(parents=True)
    shutil.copy(fleet.inventory, inventory / "hosts.yml")
    desired = yaml.safe_load((REPO / "examples" / "group_vars" / "all.yml").read_text())
    desired.update(cargoship_kubeconfig_path=str(local), cargoship_cluster_name="lab")
    (inventory / "group_vars" / "all.yml").write_text(yaml.safe_dump(desired))
    before = local.read_text()

    dry = cargoship(
        "engine-config-sync",
        "-i",
        str(inventory),
        "--dry-run",
        "--kubeconfig",
        "--report-json",
        str(tmp_path / "d.json"),
    )
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assessed = phase(json.loads((tmp_path / "d.json").read_text()), "kubeconfig")
    assert assessed["status"] == "would run"
    assert local.read_text() == before
    token = fleet.lab.token
    assert token not in dry.stdout + dry.stderr + (tmp_path / "d.json").read_text()

    real = cargoship("engine-config-sync", "-i", str(inventory), "--confirm", "--kubeconfig")
    assert real.returncode == 0, real.stdout + real.stderr
    assert token not in real.stdout + real.stderr
    merged = yaml.safe_load(local.read_text())
    assert merged["current-context"] == "other", "an existing current context must be kept"
    assert {c["name"] for c in merged["contexts"]} == {"other", "lab"}
    assert oct(local.stat().st_mode & 0o777) == "0o600"
    nodes = subprocess.run(
        ["kubectl", "--kubeconfig", str(local), "--context", "lab", "get", "nodes", "-o", "name"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert nodes.returncode == 0, nodes.stderr
    assert sorted(nodes.stdout.split()) == [f"node/{n}" for n in sorted(fleet.hosts)]
    again = cargoship(
        "engine-config-sync",
        "-i",
        str(inventory),
        "--confirm",
        "--kubeconfig",
        "--report-json",
        str(tmp_path / "a.json"),
    )
    assert again.returncode == 0, again.stderr
    assert phase(json.loads((tmp_path / "a.json").read_text()), "kubeconfig")["status"] == "nothing to do"
