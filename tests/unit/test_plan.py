"""A reviewed plan (plugin_utils/_plan.py): what it records, that it holds no credential, that an edited or
other plan is refused, that every difference from the hosts is named; the restart mode it records; the
command's plan options, refused before any host is touched."""

from __future__ import annotations

import hashlib
import json
import os

import pytest
from click.testing import CliRunner

from ansible_collections.cargoship.engine.plugins.module_utils._engine_config import fingerprint_of
from ansible_collections.cargoship.engine.plugins.plugin_utils import _plan
from ansible_collections.cargoship.engine.plugins.plugin_utils._phase_rules import restart_mode
from cargoship_runner.cli import main

PASSWORD = "Tr0ub4dor-and-3"
CHART_SECRET = "chart-secret-under-an-odd-key"
REGISTRIES_FILE = "/etc/rancher/k3s/registries.yaml"
CHARTS_FILE = "/var/lib/rancher/k3s/server/manifests/cargoship-traefik-config.yaml"


def state(password: str = PASSWORD, replicas: int = 2) -> dict:
    return {
        "engine": "k3s",
        "registries": {
            "mirrors": {"docker.io": {"endpoint": ["https://mirror.example"]}},
            "configs": {"mirror.example": {"auth": {"username": "pull", "password": password}}},
        },
        "chart_values": {"traefik": {"values": {"replicas": replicas, "odd": {"blob": CHART_SECRET}}}},
        "secret_paths": ["traefik.odd.blob"],
    }


ENGINE = {
    "version": "v1.30.2+k3s1",
    "service": "k3s",
    "services": {"k3s": "active"},
    "settings": {"node_name": "node-c1"},
}
AGENT = {**ENGINE, "service": "k3s-agent", "services": {"k3s-agent": "active"}, "settings": {"node_name": "node-w1"}}
REGISTRIES_CHANGE = {"path": REGISTRIES_FILE, "kind": "registries", "action": "update", "restart": True}


def compared(files: dict, changes: list = ()) -> dict:
    return {
        "changes": list(changes),
        "restart_required": any(c["restart"] for c in changes),
        "fingerprint": files,
    }


FILES = {REGISTRIES_FILE: "masked-sha256:aa size:10 mtime:1", CHARTS_FILE: "absent"}


def plan_of(c1: dict | None = None, w1: dict | None = None, restart: str = "drain", salt: str = "00" * 16, states=None):
    states = states or {}
    c1 = c1 or compared(FILES, [REGISTRIES_CHANGE])
    w1 = w1 or compared({REGISTRIES_FILE: "masked-sha256:aa size:10 mtime:1"}, [REGISTRIES_CHANGE])
    desired = {"c1": states.get("c1", state()), "w1": states.get("w1", state())}
    hosts = {
        "c1": _plan.host_entry("c1", "controller", desired["c1"], ENGINE, c1, restart_mode(c1, ENGINE, False, restart)),
        "w1": _plan.host_entry("w1", "worker", desired["w1"], AGENT, w1, restart_mode(w1, AGENT, False, restart)),
    }
    return _plan.make(hosts, ["node-c1", "node-w1"], desired, salt)


def test_a_plan_records_what_each_decision_was_made_from_and_what_was_decided():
    plan = plan_of(restart="in_place")
    c1 = plan["hosts"]["c1"]
    assert c1["node"] == "node-c1" and c1["version"] == "v1.30.2+k3s1" and c1["unit_state"] == "active"
    assert c1["files"] == FILES and c1["desired"].startswith("sha256:")
    assert c1["changes"] == [{"path": REGISTRIES_FILE, "kind": "registries", "action": "update"}]
    assert c1["restart"] == "in_place" and "registries changed" in c1["why"]
    assert plan["nodes"] == ["node-c1", "node-w1"]
    # A worker's desired state leaves the chart values out (they are written on controllers only).
    assert _plan.masked_state(state(), "worker").keys() == {"engine", "registries"}


def test_no_credential_and_no_fast_hash_of_one_is_in_the_plan(tmp_path):
    text = _plan.dump(plan_of())
    assert PASSWORD not in text and CHART_SECRET not in text
    for secret in (PASSWORD, CHART_SECRET):
        assert hashlib.sha256(secret.encode()).hexdigest() not in text
    # The digest that covers credentials too is salted and slow: another salt, another digest.
    assert plan_of()["inventory"]["digest"] != plan_of(salt="11" * 16)["inventory"]["digest"]
    path = tmp_path / "p.json"
    _plan.write(str(path), plan_of())
    assert os.stat(path).st_mode & 0o777 == 0o600


def test_a_file_that_may_hold_credentials_is_fingerprinted_masked_and_by_its_stat(tmp_path):
    registries = tmp_path / "registries.yaml"
    text = f"configs:\n  m.example:\n    auth:\n      username: pull\n      password: {PASSWORD}\n"
    registries.write_text(text)
    item = {"path": str(registries), "kind": "registries", "content": None, "restart": True}
    found = fingerprint_of(item, text, [])
    assert found.startswith("masked-sha256:") and hashlib.sha256(text.encode()).hexdigest() not in found
    # The same file with another password of the same length: the masked hash is the same, the stat is not.
    other = text.replace(PASSWORD, "x" * len(PASSWORD))
    registries.write_text(other)
    os.utime(registries, ns=(1, 1))
    again = fingerprint_of(item, other, [])
    assert again.split()[0] == found.split()[0] and again != found
    audit = {"path": str(tmp_path / "audit.yaml"), "kind": "audit_policy", "content": None, "restart": True}
    assert fingerprint_of(audit, "rules: []\n", []) == "sha256:" + hashlib.sha256(b"rules: []\n").hexdigest()
    assert fingerprint_of(audit, None, []) == "absent"


def test_the_plan_file_carries_its_digest_and_an_edited_or_other_plan_is_refused(tmp_path):
    path = tmp_path / "plan.json"
    digest = _plan.write(str(path), plan_of())
    assert _plan.load(str(path), digest) == (plan_of(), digest)
    assert digest.startswith("sha256:") and json.loads(path.read_text())["digest"] == digest
    edited = path.read_text().replace('"restart": "drain"', '"restart": "in_place"', 1)
    path.write_text(edited)
    with pytest.raises(_plan.PlanError, match="was changed since it was written"):
        _plan.load(str(path))
    other = tmp_path / "other.json"
    _plan.write(str(other), plan_of(restart="in_place"))
    with pytest.raises(_plan.PlanError, match=f"is not the reviewed plan: .* the reviewed one is {digest}"):
        _plan.load(str(other), digest)
    (tmp_path / "junk.json").write_text("{}")
    with pytest.raises(_plan.PlanError, match="is not a cargoship plan"):
        _plan.load(str(tmp_path / "junk.json"))


def test_every_difference_from_the_hosts_is_named_with_its_host():
    planned = plan_of()
    assert _plan.differences(planned, plan_of()) == []
    drifted = {**FILES, REGISTRIES_FILE: "masked-sha256:bb size:11 mtime:2"}
    now = plan_of(c1=compared(drifted, [REGISTRIES_CHANGE]))
    assert _plan.differences(planned, now) == [f"c1: {REGISTRIES_FILE} changed since the plan"]
    created = plan_of(c1=compared({**FILES, CHARTS_FILE: "sha256:cc"}, [REGISTRIES_CHANGE]))
    assert _plan.differences(planned, created) == [f"c1: {CHARTS_FILE} was created since the plan"]
    # The inventory's desired state changed for w1 (a value the plan shows): named for w1.
    assert _plan.differences(planned, plan_of(states={"w1": state() | {"audit_log": {"maxage": 3}}})) == [
        "w1: the inventory's desired state for it is not the plan's"
    ]
    # Only a credential changed: the masked digests agree, the salted digest of the whole does not.
    assert _plan.differences(planned, plan_of(states={"c1": state(password="another")})) == [
        "the inventory's desired state is not the plan's in a value the plan does not show (a credential)"
    ]
    # Same files and desired state, another decision: a run option differs.
    option = _plan.differences(planned, plan_of(restart="in_place"))
    assert len(option) == 2 and "cargoship_restart" in option[0] and option[0].startswith("c1: would now do")
    # Hosts and nodes of the fleet.
    more = {**planned, "hosts": {**planned["hosts"], "w9": planned["hosts"]["w1"]}, "nodes": ["node-c1"]}
    found = _plan.differences(planned, more)
    assert "hosts not in the plan: w9" in found and "nodes left the cluster since the plan: node-w1" in found
    # What the run would delete through the API (chart values no longer in the inventory).
    pruning = {**planned, "cluster": ["delete HelmChartConfig kube-system/traefik"]}
    assert _plan.differences(planned, pruning) == [
        "the cluster: the run would now delete HelmChartConfig kube-system/traefik, the plan lists nothing"
    ]


def test_the_restart_mode_is_the_least_each_change_needs():
    charts = {"changes": [{"kind": "chart_values", "restart": False}], "restart_required": False}
    registries = {"changes": [{"kind": "registries", "restart": True}], "restart_required": True}
    audit = {"changes": [{"kind": "audit_policy", "restart": True}], "restart_required": True}
    assert restart_mode(charts, ENGINE, False, "in_place") == {
        "mode": "none",
        "why": "chart values only: applied without a restart",
    }
    assert restart_mode(registries, ENGINE, False, "in_place")["mode"] == "in_place"
    assert restart_mode(registries, ENGINE, False, "drain")["mode"] == "drain"
    assert restart_mode(audit, ENGINE, False, "in_place")["mode"] == "in_place"
    assert restart_mode({"changes": []}, ENGINE, True, "drain") == {
        "mode": "drain",
        "why": "cargoship_force restarts it; cargoship_restart: drain",
    }
    down = {**ENGINE, "services": {"k3s": "failed"}}
    assert restart_mode(registries, down, False, "in_place") == {
        "mode": "drain",
        "why": "its engine is failed: a node whose engine is not running is always drained",
    }


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--plan-out", "p.json"], "--plan-out writes the plan of a dry run: add --dry-run"),
        (
            ["--dry-run", "--expect-digest", "sha256:x"],
            "--expect-digest names the digest of the plan given with --plan",
        ),
        (["--dry-run", "--plan-out", "no/such/dir/p.json"], "--plan-out no/such/dir/p.json: no such directory"),
    ],
)
def test_the_commands_plan_options_are_checked_before_any_host_is_touched(tmp_path, monkeypatch, args, said):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["engine-config-sync", "-i", ".", *args])
    assert result.exit_code == 64, result.output
    assert said in result.output


def test_an_edited_plan_is_refused_by_the_command_before_any_host_is_touched(tmp_path):
    path = tmp_path / "plan.json"
    digest = _plan.write(str(path), plan_of())
    path.write_text(path.read_text().replace("node-w1", "node-w2"))
    result = CliRunner().invoke(main, ["engine-config-sync", "-i", str(tmp_path), "--plan", str(path), "--confirm"])
    assert result.exit_code == 1
    assert "refused:" in result.output and "was changed since it was written" in result.output
    _plan.write(str(path), plan_of(restart="in_place"))
    result = CliRunner().invoke(
        main, ["engine-config-sync", "-i", str(tmp_path), "--plan", str(path), "--expect-digest", digest, "--confirm"]
    )
    assert result.exit_code == 1 and "is not the reviewed plan" in result.output


def test_a_plan_given_where_it_cannot_serve_is_refused_before_any_host_is_touched(tmp_path):
    from ansible_collections.cargoship.engine.plugins.action import validate_input

    path = tmp_path / "plan.json"
    digest = _plan.write(str(path), plan_of())

    def problems(check_mode: bool = False, **given) -> list[str]:
        return [found[0] for found in validate_input.plan_problems(given, check_mode)]

    assert problems(True, cargoship_plan_out=str(tmp_path / "new.plan")) == []
    assert problems(cargoship_plan_file=str(path), cargoship_plan_digest=digest) == []
    assert problems(cargoship_plan_out="p") == [
        "cargoship_plan_out: the plan is written by a dry run; run with --check (cargoship: --dry-run)"
    ]
    assert problems(True, cargoship_plan_out="p", cargoship_plan_file=str(path))[0].startswith(
        "cargoship_plan_out and cargoship_plan_file: a dry run writes a plan, a later run applies it"
    )
    assert problems(cargoship_plan_digest=digest) == [
        "cargoship_plan_digest: it names the digest of the plan given by cargoship_plan_file, which is not set"
    ]
    assert problems(cargoship_plan_file=str(path), cargoship_phase="sync_worker") == [
        "cargoship_phase: a plan covers a whole run; it cannot be written or applied with one phase alone"
    ]
    other = problems(cargoship_plan_file=str(path), cargoship_plan_digest="sha256:" + "0" * 64)
    assert len(other) == 1 and "is not the reviewed plan" in other[0]
    # Where the dry run cannot write it at its end, known before it starts (ansible-playbook users too).
    assert problems(True, cargoship_plan_out=str(tmp_path / "no-dir" / "p.plan")) == [
        f"cargoship_plan_out: no such directory {tmp_path / 'no-dir'} on the control host"
    ]
    assert problems(True, cargoship_plan_out=str(tmp_path)) == [
        f"cargoship_plan_out: {tmp_path} is a directory; name the plan file to write"
    ]
    missing = problems(cargoship_plan_file=str(tmp_path / "none.plan"))
    assert missing == [f"cargoship_plan_file: cannot read the plan {tmp_path / 'none.plan'}: No such file or directory"]
    # The restart mode is one of two words.
    found = validate_input.host_problems(
        {"cargoship_engine": "k3s", "cargoship_restart": "inplace"}, validate_input.load_phases()
    )
    assert [message for message, _origin in found] == ["cargoship_restart: expected drain or in_place, got 'inplace'"]


def test_the_plan_lists_the_profile_labels_the_run_would_set():
    from ansible_collections.cargoship.engine.plugins.action.run_plan import labels

    hosts = plan_of()["hosts"]
    hostvars = {
        "c1": {"cargoship_profile": "edge", "cargoship_label_nodes": True},
        "w1": {"cargoship_profile": "gpu", "cargoship_label_nodes": "true"},
    }
    nodes = {"node-c1": {"node-role.kubernetes.io/edge": "true"}, "node-w1": {}}
    assert labels(hosts, hostvars, nodes) == ["label node node-w1 node-role.kubernetes.io/gpu=true"]
    # Labelling off: nothing to list.
    assert labels(hosts, {h: {**v, "cargoship_label_nodes": False} for h, v in hostvars.items()}, nodes) == []


def survey_of(engine: dict, compared_answer: dict, sync: str) -> dict:
    return {"answers": [{"phase": "engine_facts", "result": engine}, {"phase": sync, "result": compared_answer}]}


def test_the_action_writes_the_plan_from_the_survey_and_the_api_and_checks_hosts_and_nodes_against_it(kube, tmp_path):
    from ansible_collections.cargoship.engine.plugins.action.run_plan import ActionModule, Refused

    kube.node("node-c1")
    kube.node("node-w1")
    c1 = compared(FILES, [REGISTRIES_CHANGE])
    w1 = compared({REGISTRIES_FILE: "masked-sha256:aa size:10 mtime:1"})
    hostvars = {
        "c1": {
            **dict.fromkeys(()),
            "fleet_controllers": ["c1"],
            "cargoship_engine": "k3s",
            "connect_survey": survey_of(ENGINE, c1, "sync_controller"),
        },
        "w1": {
            "fleet_controllers": ["c1"],
            "cargoship_engine": "k3s",
            "connect_survey": survey_of(AGENT, w1, "sync_worker"),
        },
    }
    action = ActionModule.__new__(ActionModule)
    path = tmp_path / "fleet.plan"
    args = {"path": str(path), "hosts": ["c1", "w1"], **kube.access}
    written = action.written(args, {"hostvars": hostvars})
    plan, digest = _plan.load(str(path))
    assert written["cargoship_plan"] == {
        "digest": digest,
        "file": str(path),
        "written": True,
        "hosts_with_work": ["c1"],
    }
    assert plan["nodes"] == ["node-c1", "node-w1"] and plan["hosts"]["c1"]["restart"] == "drain"
    assert action.checked({**args, "expect_digest": digest}, {"hostvars": hostvars})["cargoship_plan"]["applied"]
    # w1's file changed since, and a node joined: every difference named, nothing else done.
    hostvars["w1"]["connect_survey"] = survey_of(AGENT, compared({REGISTRIES_FILE: "absent"}), "sync_worker")
    kube.node("node-w2")
    with pytest.raises(
        Refused, match=r"is stale: nodes joined the cluster since the plan: node-w2; w1: .* was removed"
    ):
        action.checked(args, {"hostvars": hostvars})
    # At its turn, under the lock, a node is checked again from what its sync just read.
    assert action.node_checked({**args, "host": "c1", "compared": c1, "engine": ENGINE}, {"hostvars": hostvars})
    with pytest.raises(Refused, match=r"c1 is no longer as the plan .* found it: engine version is v1\.31\.0"):
        later = {**ENGINE, "version": "v1.31.0+k3s1"}
        action.node_checked({**args, "host": "c1", "compared": c1, "engine": later}, {"hostvars": hostvars})
