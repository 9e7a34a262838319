"""A dry run's assessment of a play (plugin_utils/_dry_run.py): every planned phase for all of a play's hosts at
once, on the control host, from the survey's answers; and which steps a dry run still does on each host or once."""

from __future__ import annotations

import pytest

from ansible_collections.cargoship.engine.plugins.plugin_utils._dry_run import PlayAssessment
from ansible_collections.cargoship.engine.plugins.plugin_utils._phases import (
    DRY_RUN_SCOPES,
    entry_point,
    load_phases,
    play_steps,
    step_scope,
)
from ansible_collections.cargoship.engine.plugins.plugin_utils._report import RunReport

HOOKS = {
    "detect_os.before.worker": [{"name": "say hello", "command": "true"}],
    "sync_worker.before.worker": [{"name": "page on-call", "command": "true"}],
    "kubeconfig.after.controller": [{"name": "tell the team", "command": "true"}],
    "connect.before.controller": [{"name": "warm up", "command": "true"}],
    "cluster_ready": [{"name": "smoke test", "command": "true"}],
}


def engine(node: str, state: str = "active", profile: str = "") -> dict:
    return {
        "changed": False,
        "service": "k3s-agent",
        "services": {"k3s-agent": state},
        "settings": {"node_name": node, "profile": profile, "profile_from": "config.yaml"},
    }


def survey(host: str, **overrides) -> dict:
    """A host's survey result, as host_survey registers it: one answer per phase's declared read."""
    answers = {
        "detect_os": {"changed": False, "os": {"arch": "amd64", "id": "debian"}},
        "lock": {"changed": True, "changes": ["take the lock"]},
        "host_facts": {
            "changed": False,
            "network": {"hostname": host, "private_address": f"10.0.{ord(host[0])}.{host[-1]}"},
            "clock": {"skew": 0.2},
            "firewall": {"input_policy": "accept"},
        },
        "engine_facts": engine(f"node-{host}"),
        "sync_worker": {"changed": False, "changes": [], "restart_required": False},
        "sync_controller": {"changed": False, "changes": [], "restart_required": False},
        "disconnect": {"changed": False},
    }
    answers.update(overrides)
    return {
        "changed": False,
        "answers": [{"phase": p, "module": "x", "args": {}, "result": r} for p, r in answers.items()],
    }


class Modules:
    """The control host's module calls an assessment makes (the Kubernetes API), recorded, with canned answers."""

    def __init__(self, **answers):
        self.calls: list[tuple[str, dict]] = []
        self.answers = answers

    def __call__(self, name: str, args: dict) -> dict:
        self.calls.append((name, args))
        if name == "cluster_node" and args["state"] == "drained":
            return {"changed": True, "by_node": {n: ["cordon", f"evict default/web-{n}"] for n in args["names"]}}
        return dict(self.answers.get(f"{name}.{args['state']}" if "state" in args else name, {"changed": False}))


def assess(play: str, hostvars: dict, modules=None, settings=None, hooks=None, selected=""):
    settings = {"fleet_controllers": [h for h in hostvars if h.startswith("c")], **(settings or {})}
    run = modules or Modules()
    result = PlayAssessment(list(hostvars), hostvars, settings, run, selected, hooks or {}).run(play)
    return result, run


def by(result: dict, host: str, phase: str) -> list[dict]:
    return [i for i in result["cargoship_assessed"] if i["host"] == host and i["phase"] == phase]


def test_a_play_is_assessed_from_the_survey_answers_for_every_host_with_one_call_to_the_api():
    hostvars = {h: {"connect_survey": survey(h)} for h in ("c1", "w1", "w2")}
    result, modules = assess("prepare", hostvars)
    assert not result.get("failed"), result.get("msg")
    for host in hostvars:
        phases = [
            i["phase"] for i in result["cargoship_assessed"] if i["host"] == host and i["phase"] != "validate_hosts"
        ]
        assert list(dict.fromkeys(phases)) == ["detect_os", "lock", "host_facts", "engine_facts"], host
        lock = by(result, host, "lock")[0]
        assert lock["status"] == "changed" and lock["result"]["answered_by"] == "host_survey"
    # The checks of the hosts against each other and the nodes' check: once for the play, on its first host.
    assert [i["host"] for i in result["cargoship_assessed"] if i["phase"] == "validate_hosts"] == ["c1"]
    assert modules.calls == [
        ("cluster_node", {"state": "known", "node_of": {"c1": "node-c1", "w1": "node-w1", "w2": "node-w2"}})
    ]


def test_a_drifted_or_stopped_node_gets_its_restart_with_the_batchs_one_drain_assessment_and_its_hooks():
    hostvars = {
        "w1": {
            "connect_survey": survey("w1", sync_worker={"changed": True, "changes": [], "restart_required": True}),
            "cargoship_hooks": HOOKS,
        },
        "w2": {
            "connect_survey": survey("w2", engine_facts=engine("node-w2", state="failed")),
            "cargoship_hooks": HOOKS,
        },
        "w3": {"connect_survey": survey("w3"), "cargoship_hooks": HOOKS},
    }
    settings = {"cargoship_api_context": "lab", "fleet_api_hosts": ["10.0.0.11", "10.0.0.12"]}
    result, modules = assess("workers", hostvars, hooks=HOOKS, settings=settings)
    assert not result.get("failed")
    drains = [args for name, args in modules.calls if args.get("state") == "drained"]
    # One drain assessment, of the nodes a real run would drain (w3 has nothing to do), through the API as a
    # real run reaches it (the controllers' API servers when the kubeconfig's does not answer).
    assert drains == [
        {
            "names": ["node-w1", "node-w2"],
            "state": "drained",
            "force": False,
            "context": "lab",
            "fallback_hosts": ["10.0.0.11", "10.0.0.12"],
        }
    ]
    restart = by(result, "w1", "sync_worker")[-1]["result"]["cargoship_phase"]["changes"]
    assert restart == [
        "cordon",
        "evict default/web-node-w1",
        "drain and restart k3s-agent (its files changed; cargoship_restart: drain)",
        "wait until Ready",
        "uncordon",
    ]
    down = by(result, "w2", "sync_worker")[-1]["result"]["cargoship_phase"]["changes"]
    assert (
        "drain and restart k3s-agent (its engine is failed: a node whose engine is not running is always drained)"
        in down
    )
    # w3 has nothing to do: its comparison only, no restart and no hooks listed.
    assert [i["task"] for i in by(result, "w3", "sync_worker")] == [
        "Compare the engine configuration with the desired state"
    ]
    hooks = [i["result"]["cargoship_phase"]["changes"] for i in by(result, "w1", "hooks")]
    assert hooks == [["would run hook sync_worker.before.worker: page on-call"]]
    assert not by(result, "w3", "hooks")


def test_a_restart_in_place_is_assessed_without_a_drain_and_says_why():
    registries = {"kind": "registries", "path": "/etc/rancher/k3s/registries.yaml", "action": "update", "restart": True}
    in_place = {"cargoship_restart": "in_place"}
    hostvars = {
        "w1": {
            "connect_survey": survey(
                "w1", sync_worker={"changed": True, "changes": [registries], "restart_required": True}
            ),
            **in_place,
        },
        # A stopped engine is drained whatever the setting.
        "w2": {"connect_survey": survey("w2", engine_facts=engine("node-w2", state="failed")), **in_place},
        "w3": {
            "connect_survey": survey(
                "w3", sync_worker={"changed": True, "changes": [registries], "restart_required": True}
            )
        },
    }
    result, modules = assess("workers", hostvars, settings={"cargoship_api_context": "lab"})
    assert not result.get("failed"), result.get("msg")
    drains = [args["names"] for name, args in modules.calls if args.get("state") == "drained"]
    assert drains == [["node-w2", "node-w3"]]
    w1 = by(result, "w1", "sync_worker")[-1]["result"]["cargoship_phase"]["changes"]
    assert w1 == [
        "restart k3s-agent in place (registries changed; cargoship_restart: in_place, so no drain: pods keep running)",
        "wait until Ready",
    ]
    w3 = by(result, "w3", "sync_worker")[-1]["result"]["cargoship_phase"]["changes"]
    assert "drain and restart k3s-agent (registries changed; cargoship_restart: drain)" in w3
    assert w3[-1] == "uncordon"


def test_the_window_check_is_listed_for_every_node_with_work_and_the_restart_hooks_only_around_a_restart():
    hooks = {
        "sync_controller.window.controller": [{"name": "change window", "command": "true"}],
        "sync_controller.before.controller": [{"name": "page", "command": "true"}],
    }
    charts = {"kind": "chart_values", "path": "/m/traefik.yaml", "action": "update", "restart": False}
    hostvars = {
        "c1": {
            "connect_survey": survey("c1", sync_controller={"changed": True, "changes": [charts]}),
            "cargoship_hooks": hooks,
        },
        "c2": {"connect_survey": survey("c2"), "cargoship_hooks": hooks},
    }
    result, _modules = assess("controllers", hostvars, hooks=hooks, settings={"fleet_controllers": ["c1", "c2"]})
    assert not result.get("failed"), result.get("msg")
    listed = [i["result"]["cargoship_phase"]["changes"] for i in by(result, "c1", "hooks")]
    assert listed == [["would run hook sync_controller.window.controller: change window"]]
    assert not by(result, "c2", "hooks")


def test_the_report_reads_an_assessment_as_it_reads_each_hosts_own_tasks():
    hostvars = {
        "w1": {"connect_survey": survey("w1", sync_worker={"changed": True, "changes": [], "restart_required": True})},
        "w2": {"connect_survey": survey("w2")},
    }
    result, _modules = assess("workers", hostvars)
    report = RunReport("engine-config-sync", dry_run=True)
    for item in result["cargoship_assessed"]:
        report.result(item["host"], item["phase"], item["task"], item["result"], item["status"])
    phase = next(p for p in report.as_dict()["phases"] if p["name"] == "sync_worker")
    assert phase["status"] == "would run"
    assert phase["hosts"]["w1"]["status"] == "would run" and phase["hosts"]["w2"]["status"] == "nothing to do"


def test_hooks_around_a_phase_are_listed_for_each_host_by_its_own_node_role():
    hostvars = {h: {"connect_survey": survey(h), "cargoship_hooks": HOOKS} for h in ("c1", "w1")}
    result, _modules = assess("prepare", hostvars, hooks=HOOKS)
    assert [i["result"]["cargoship_phase"]["changes"] for i in by(result, "w1", "hooks")] == [
        ["would run hook detect_os.before.worker: say hello"]
    ]
    assert [i["result"]["cargoship_phase"]["changes"] for i in by(result, "c1", "hooks")] == [[]]


def test_a_failure_on_one_host_stops_the_play_there_naming_the_host():
    held = {"failed": True, "msg": "the lock is held by run 42 of alice"}
    hostvars = {"c1": {"connect_survey": survey("c1")}, "w1": {"connect_survey": survey("w1", lock=held)}}
    result, modules = assess("prepare", hostvars)
    assert result["failed"] and result["stopped_by"] == "w1" and "held by run 42" in result["msg"]
    assert {i["phase"] for i in result["cargoship_assessed"]} == {"detect_os", "lock"}  # nothing after the lock
    assert modules.calls == []


def test_a_host_the_survey_did_not_answer_for_fails_rather_than_being_taken_for_in_sync():
    hostvars = {"w1": {"connect_survey": {"failed": True, "msg": "unreachable"}}}
    result, _modules = assess("workers", hostvars)
    assert result["failed"] and "no answer from the survey of w1" in result["msg"]


def test_a_cis_hardened_rke2_server_is_refused_unless_told_to():
    cis = engine("node-c1", profile="cis")
    common = {
        "connect_survey": survey("c1", engine_facts=cis),
        "cargoship_engine": "rke2",
        "cargoship_pod_security": {},
    }
    result, _modules = assess("prepare", {"c1": dict(common)})
    assert result["failed"] and "rancher-restricted" in result["msg"]
    result, _modules = assess("prepare", {"c1": {**common, "cargoship_pod_security_over_cis": True}})
    assert not result.get("failed")


def test_the_controllers_play_deletes_only_the_chart_values_no_longer_listed():
    hostvars = {h: {"connect_survey": survey(h)} for h in ("c1", "c2")}
    values = {"traefik": {"values": {}}, "old": "absent", "nginx": {"namespace": "ingress", "values": {}}}
    _result, modules = assess("controllers", hostvars, settings={"cargoship_chart_values": values})
    assert modules.calls[-1] == ("helm_chart_configs", {"keep": ["kube-system/traefik", "ingress/nginx"]})


def test_each_dry_run_step_is_done_in_exactly_one_way_and_only_connect_goes_to_each_host():
    phases = load_phases()
    by_name = {p["name"]: p for p in phases}
    for play in ("prepare", "controllers", "workers", "finish"):
        every = play_steps(phases, play, "", HOOKS, True)
        scoped = [play_steps(phases, play, "", HOOKS, True, scope=s) for s in DRY_RUN_SCOPES]
        assert sorted(map(str, every)) == sorted(str(step) for steps in scoped for step in steps), play
        for step in scoped[0]:
            assert step_scope(step, by_name) == "each host"
            assert (step["role"] if step["role"] != "hooks" else step["point"].split(".")[0]) == "connect"
    # Outside a dry run the scope is ignored: every step runs on each host.
    assert play_steps(phases, "prepare", "", HOOKS, False, scope="each host") == play_steps(
        phases, "prepare", "", HOOKS, False
    )


@pytest.mark.parametrize("phase", [p for p in load_phases() if p["dry_run_scope"] == "play"], ids=lambda p: p["name"])
def test_every_phase_a_dry_run_assesses_in_its_play_has_an_assessment(phase):
    if entry_point(phase, True) == "none":
        return  # reported unassessed
    assert phase.get("read") or hasattr(PlayAssessment, f"assess_{phase['name']}"), phase["name"]


def test_hooks_given_in_one_hosts_own_variables_are_listed_for_that_host():
    own = {"host_facts.after.worker": [{"name": "only on w2", "command": "true"}]}
    hostvars = {"c1": {"connect_survey": survey("c1")}, "w2": {"connect_survey": survey("w2"), "cargoship_hooks": own}}
    result, _modules = assess("prepare", hostvars)  # the play's hooks (the first host's) name none
    assert [i["result"]["cargoship_phase"]["changes"] for i in by(result, "w2", "hooks")] == [
        ["would run hook host_facts.after.worker: only on w2"]
    ]
