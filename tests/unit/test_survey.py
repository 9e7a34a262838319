"""host_survey: one round that answers the read-only calls of host_info, host_lock, engine_info and
engine_config exactly as those modules would, and the control host's rule for when an answer holds."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from test_modules import run_module

from ansible_collections.cargoship.engine.plugins.module_utils._credentials import calls_moved_out, moved_out
from ansible_collections.cargoship.engine.plugins.plugin_utils._host_checks import facts_of, narrowed_clock, problems
from ansible_collections.cargoship.engine.plugins.plugin_utils._survey import (
    answer_from,
    answer_from_comparison,
    timed_answer,
    timed_survey,
)

NO_ENGINE_HERE = any(Path(p).exists() for p in ("/etc/rancher", "/var/lib/rancher"))


def survey(calls: list, diff: bool = False) -> dict:
    """host_survey as its action plugin calls it: engine_config credentials moved out, one list per call."""
    moved, credentials = calls_moved_out(calls)
    return run_module("host_survey", {"calls": moved, "credentials": credentials, "_ansible_diff": diff})


def without_volatile(result: dict) -> dict:
    """The result without what depends on the moment it was asked: a lock's age, also where a line quotes it
    (two calls a second boundary apart say "touched 0s ago" and "touched 1s ago")."""
    kept = {k: v for k, v in result.items() if k not in ("invocation", "age", "clock", "answered_by")}
    return json.loads(re.sub(r"touched \d+s ago", "touched Ns ago", json.dumps(kept)))


def test_each_answer_is_what_the_module_itself_returns_and_nothing_is_written(tmp_path):
    lock = tmp_path / "lock.json"
    lock.write_text(json.dumps({"run_id": "other", "holder": {"user": "alice"}}))
    calls = [
        {"module": "host_info", "args": {"gather": ["os", "network"]}},
        {"module": "host_lock", "args": {"state": "acquired", "run_id": "mine", "path": str(lock)}},
        {"module": "engine_info", "args": {"engine": "rke2", "require_installed": True}},
    ]
    result = survey(calls)
    assert not result.get("failed") and result["changed"] is False
    answers = result["answers"]
    assert [a["module"] for a in answers] == ["host_info", "host_lock", "engine_info"]
    for call, answer in zip(calls, answers, strict=True):
        assert answer["args"] == call["args"]
        alone = run_module(call["module"], call["args"], check_mode=True)
        assert without_volatile(answer["result"]) == without_volatile(alone), call["module"]
    # The held lock is answered as the module answers it in check mode (held, naming its holder)...
    assert answers[1]["result"]["held"] is True and "alice" in answers[1]["result"]["changes"][0]
    # ...and the survey took nothing: the other run's lock is as it was.
    assert json.loads(lock.read_text())["run_id"] == "other"
    if not NO_ENGINE_HERE or Path("/usr/local/bin/rke2").exists():
        return
    # A failing call is answered with its failure; the survey itself does not fail.
    assert answers[2]["result"]["failed"] is True and "no rke2 installed" in answers[2]["result"]["msg"]


def test_a_call_with_bad_arguments_is_answered_with_the_modules_error():
    result = survey([{"module": "host_lock", "args": {"state": "taken", "run_id": "x"}}])
    assert not result.get("failed")
    assert result["answers"][0]["result"]["failed"] is True
    assert "state" in result["answers"][0]["result"]["msg"]


def test_a_call_of_another_module_is_refused():
    result = run_module("host_survey", {"calls": [{"module": "command", "args": {"cmd": "id"}}]})
    assert result["failed"] and "not 'command'" in result["msg"]


@pytest.mark.skipif(NO_ENGINE_HERE, reason="this machine has an engine configuration of its own")
def test_engine_config_compare_in_the_survey_keeps_credentials_out_and_equals_the_modules_diff():
    registries = {
        "mirrors": {"docker.io": {"endpoint": ["https://mirror.example:5000"]}},
        "configs": {"mirror.example:5000": {"auth": {"username": "puller", "password": "hunter2-canary"}}},
    }
    args = {"engine": "k3s", "node_role": "agent", "registries": registries, "layout": {}}
    result = survey([{"module": "engine_config", "args": args}], diff=True)
    answer = result["answers"][0]
    assert "hunter2-canary" not in json.dumps(result)
    alone = run_module("engine_config", {**moved_out(args), "_ansible_diff": True}, check_mode=True)
    assert without_volatile(answer["result"]) == without_volatile(alone)
    assert "https://mirror.example:5000" in answer["result"]["changes"][0]["diff"]
    assert not Path("/etc/rancher").exists()


def test_engine_config_without_a_layout_takes_the_engine_settings_answered_before_it():
    result = survey(
        [
            {"module": "engine_info", "args": {"engine": "k3s", "node_role": "agent"}},
            {"module": "engine_config", "args": {"engine": "k3s", "state": "cleaned"}},
        ]
    )
    info, clean = result["answers"]
    if info["result"].get("failed"):
        assert clean["result"].get("skipped"), "no settings to take a layout from"
    else:
        assert clean["args"]["layout"] == info["result"]["settings"]


SURVEY = {
    "changed": False,
    "dry_run": True,
    "diff_mode": True,
    "answers": [
        {"module": "host_info", "args": {"gather": ["os"]}, "result": {"os": {"id": "debian"}}},
        {
            "module": "host_info",
            "args": {"gather": ["clock"], "reference_epoch": 100.0},
            "result": {"clock": {"skew": 1}},
        },
        {"module": "host_lock", "args": {"state": "acquired", "run_id": "r"}, "result": {"changes": ["take the lock"]}},
        {"module": "engine_config", "args": {"engine": "k3s", "state": "cleaned"}, "result": {"changes": []}},
        {"module": "engine_config", "args": {"engine": "k3s"}, "result": {"skipped": True}},
    ],
}


def test_an_answer_is_given_for_the_same_arguments_only():
    found = answer_from(SURVEY, "host_info", {"gather": ["os"]}, check_mode=False, diff_mode=False)
    assert found == {"os": {"id": "debian"}, "answered_by": "host_survey"}
    assert answer_from(SURVEY, "host_info", {"gather": ["os", "network"]}, False, False) is None
    assert answer_from(SURVEY, "host_info", {"gather": ["os"], "supported_os": []}, False, False) is None
    # The moment a clock is read against is not part of the question.
    assert answer_from(SURVEY, "host_info", {"gather": ["clock"], "reference_epoch": 250.0}, False, False)
    # An argument left out (omitted) and one given as null are the same call.
    assert answer_from(SURVEY, "host_info", {"gather": ["os"], "survey": None}, False, False)
    assert answer_from({"failed": True, **SURVEY}, "host_info", {"gather": ["os"]}, False, False) is None
    assert answer_from(None, "host_info", {"gather": ["os"]}, False, False) is None


def test_what_a_real_run_changes_is_answered_in_check_mode_only_but_nothing_to_clean():
    lock = {"state": "acquired", "run_id": "r"}
    assert answer_from(SURVEY, "host_lock", lock, check_mode=True, diff_mode=True)["changes"] == ["take the lock"]
    assert answer_from(SURVEY, "host_lock", lock, check_mode=False, diff_mode=True) is None
    clean = {"engine": "k3s", "state": "cleaned", "credentials": []}
    assert answer_from(SURVEY, "engine_config", clean, check_mode=True, diff_mode=True) == {
        "changes": [],
        "answered_by": "host_survey",
    }
    # Nothing to clean holds in a real run too (a run interrupted since would have held the lock this
    # run took); leftovers found are removed by the host itself.
    assert answer_from(SURVEY, "engine_config", clean, check_mode=False, diff_mode=True)["changes"] == []
    leftovers = {
        **SURVEY,
        "answers": [
            {
                "module": "engine_config",
                "args": {"engine": "k3s", "state": "cleaned"},
                "result": {"changed": True, "changes": ["remove /etc/rancher/k3s/.cargoship-x"]},
            }
        ],
    }
    assert answer_from(leftovers, "engine_config", clean, check_mode=True, diff_mode=True)["changed"] is True
    assert answer_from(leftovers, "engine_config", clean, check_mode=False, diff_mode=True) is None
    compare = {"engine": "k3s"}
    assert answer_from(SURVEY, "engine_config", compare, check_mode=False, diff_mode=True) is None
    # Diffs are made only in diff mode: a survey without them does not answer a task that wants them.
    assert answer_from(SURVEY, "engine_config", clean, check_mode=True, diff_mode=False) is None
    # A call the survey could not answer is asked again.
    assert answer_from(SURVEY, "engine_config", {"engine": "k3s"}, check_mode=True, diff_mode=True) is None


def test_a_real_run_reads_the_engine_again_under_its_lock():
    survey = {
        "dry_run": True,
        "diff_mode": False,
        "answers": [{"module": "engine_info", "args": {"engine": "k3s"}, "result": {"version": "v1"}}],
    }
    assert answer_from(survey, "engine_info", {"engine": "k3s"}, check_mode=True, diff_mode=False)["version"] == "v1"
    # Made before this run held the lock: another run may have finished in between.
    assert answer_from(survey, "engine_info", {"engine": "k3s"}, check_mode=False, diff_mode=False) is None


def test_a_real_runs_survey_made_to_check_a_plan_never_answers_a_later_comparison():
    # A real run that applies a reviewed plan asks the engine and the files in its survey (before its lock);
    # a sync phase's comparison (a task in check mode) must read them again on the host, under the lock.
    survey = {
        "dry_run": False,
        "diff_mode": False,
        "answers": [
            {"module": "engine_info", "args": {"engine": "k3s"}, "result": {"version": "v1"}},
            {"module": "engine_config", "args": {"engine": "k3s"}, "result": {"changes": []}},
        ],
    }
    assert answer_from(survey, "engine_info", {"engine": "k3s"}, check_mode=True, diff_mode=False) is None
    assert answer_from(survey, "engine_config", {"engine": "k3s"}, check_mode=True, diff_mode=False) is None
    # What no run changes still holds.
    survey["answers"].append({"module": "host_info", "args": {"gather": ["os"]}, "result": {"os": {}}})
    assert answer_from(survey, "host_info", {"gather": ["os"]}, check_mode=True, diff_mode=False) is not None


def host_vars(host: str, **more) -> dict:
    from ansible._internal._templating._utils import Omit

    return {
        "inventory_hostname": host,
        "fleet_controllers": ["c1"],
        "connect_run_id": "20261205T000000Z-1",
        "cargoship_engine": "k3s",
        "cargoship_registries": {"mirrors": {"docker.io": {"endpoint": ["https://m.example"]}}},
        "cargoship_chart_values": {"traefik": {"values": {"replicas": 2}}},
        "omit": Omit,
        **more,
    }


def templar():
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar

    return Templar(loader=DataLoader())


@pytest.mark.parametrize("check_mode", [True, False])
@pytest.mark.parametrize("host", ["c1", "w1"])
def test_every_survey_call_is_its_phases_own_call_by_construction(host, check_mode):
    """The survey asks each planned phase's declared read, and the phase's own task (phase_read) renders
    the same declaration for the same host: the calls are equal, so every answer is taken."""
    from ansible_collections.cargoship.engine.plugins.plugin_utils._reads import read_of, survey_calls

    variables = host_vars(host)
    calls = survey_calls(templar(), variables, check_mode)
    phases = [call["phase"] for call in calls]
    sync = "sync_controller" if host == "c1" else "sync_worker"
    expected = ["detect_os", "lock", "host_facts", "engine_facts", sync, "disconnect"]
    assert phases == (expected if check_mode else ["detect_os", "host_facts"])
    for call in calls:
        own = read_of(call["phase"], templar(), variables)
        assert {k: v for k, v in own["args"].items() if k != "reference_epoch"} == {
            k: v for k, v in call["args"].items() if k != "reference_epoch"
        }
        assert own["module"] == call["module"]
    engine = next(c for c in calls if c["phase"] == "engine_facts") if check_mode else None
    if engine:
        # An option given as `default(omit)` is left out, as the module would not get it.
        assert "desired_version" not in engine["args"]
        assert engine["args"]["node_role"] == ("server" if host == "c1" else "agent")


def test_a_phase_run_alone_is_surveyed_for_the_reads_of_its_plan_only():
    from ansible_collections.cargoship.engine.plugins.plugin_utils._reads import survey_calls

    calls = survey_calls(templar(), host_vars("w1"), True, selected="detect_os")
    assert [c["phase"] for c in calls] == ["detect_os", "disconnect"]


def test_the_connect_phase_names_no_phase_and_every_read_goes_through_phase_read():
    """The survey's calls come from the declarations alone; a task given the survey is a phase's declared
    read (phase_read), never a read module's arguments spelled again."""
    import yaml

    root = Path(__file__).resolve().parents[2]
    connect = yaml.safe_load((root / "roles/connect/tasks/main.yml").read_text())
    survey_task = next(t for t in connect if "cargoship.engine.host_survey" in t)
    assert set(survey_task["cargoship.engine.host_survey"]) == {"selected"}
    given = []
    for path in sorted((root / "roles").glob("*/tasks/*.yml")):
        for task in yaml.safe_load(path.read_text()) or []:
            for module, args in task.items():
                if isinstance(args, dict) and "survey" in args:
                    given.append(module)
                    assert module == "cargoship.engine.phase_read", f"{path}: {task.get('name')}"
    assert len(given) == 6


def test_a_bad_read_declaration_is_refused_naming_the_phase():
    from ansible_collections.cargoship.engine.plugins.plugin_utils._reads import problems

    assert problems("x", {"module": "command", "survey": "always", "args": []}) == [
        "x: read.module must be one of host_info, host_lock, engine_info, engine_config, not 'command'",
        "x: read.survey must be one of every run, dry run, not 'always'",
        "x: read.args must be a mapping",
    ]


@pytest.mark.parametrize("host", ["c1", "w1"])
def test_a_real_run_that_applies_a_plan_asks_the_reads_the_plan_was_made_from(host):
    from ansible_collections.cargoship.engine.plugins.plugin_utils._reads import survey_calls

    sync = "sync_controller" if host == "c1" else "sync_worker"
    calls = survey_calls(templar(), host_vars(host), False, applying_plan=True)
    # Not the lock's nor the clean-up's (a plan is not made from them): only the engine and the files.
    assert [call["phase"] for call in calls] == ["detect_os", "host_facts", "engine_facts", sync]


def test_a_real_runs_clean_up_is_answered_by_its_comparison_where_no_write_of_the_run_can_have_left_a_file():
    clean = {"engine": "k3s", "state": "cleaned", "credentials": []}
    nothing = {"changed": False, "changes": [], "leftovers": []}
    assert answer_from_comparison("engine_config", clean, nothing) == {
        "changed": False,
        "changes": [],
        "restart_required": False,
        "answered_by": "comparison",
    }
    # Leftovers found, files this run was to write, a comparison that failed, was skipped or does not say
    # (a result without the list), no comparison at all: the host is asked.
    for compared in (
        {**nothing, "leftovers": ["/etc/rancher/k3s/config.yaml.d/.cargoship-x"]},
        {**nothing, "changed": True, "changes": [{"path": "/etc/rancher/k3s/registries.yaml"}]},
        {**nothing, "failed": True},
        {**nothing, "skipped": True},
        {"changed": False, "changes": []},
        None,
    ):
        assert answer_from_comparison("engine_config", clean, compared) is None, compared
    # Files to change, written by a sync that finished: nothing of its writes is left. Leftovers found before
    # it, or a comparison that failed, still send the clean-up to the host.
    changed = {**nothing, "changed": True, "changes": [{"path": "/etc/rancher/k3s/registries.yaml"}]}
    assert answer_from_comparison("engine_config", clean, changed, synced=True)["answered_by"] == "comparison"
    assert answer_from_comparison("engine_config", clean, changed, synced=False) is None
    left = {**changed, "leftovers": ["/etc/rancher/k3s/.cargoship-x"]}
    assert answer_from_comparison("engine_config", clean, left, synced=True) is None
    assert answer_from_comparison("engine_config", clean, {**changed, "failed": True}, synced=True) is None
    # Only the clean-up is answered so.
    assert answer_from_comparison("engine_config", {"engine": "k3s"}, nothing) is None
    assert answer_from_comparison("engine_info", {"engine": "k3s", "state": "cleaned"}, nothing) is None


def test_a_comparison_lists_the_leftovers_of_an_interrupted_write_before_it_writes(tmp_path):
    layout = {
        "config_file": str(tmp_path / "etc" / "config.yaml"),
        "data_dir": str(tmp_path / "data"),
        "private_registry": str(tmp_path / "etc" / "registries.yaml"),
    }
    (tmp_path / "etc" / "config.yaml.d").mkdir(parents=True)
    leftover = tmp_path / "etc" / "config.yaml.d" / ".cargoship-interrupted"
    leftover.write_text("half")
    args = {"engine": "k3s", "node_role": "agent", "layout": layout, "registries": {"mirrors": {}}}
    compared = run_module("engine_config", args, check_mode=True)
    assert compared["leftovers"] == [str(leftover)], compared
    leftover.unlink()
    assert run_module("engine_config", args, check_mode=True)["leftovers"] == []


def test_a_lock_taken_in_a_real_run_answers_the_reads_given_in_the_same_round(tmp_path):
    lock = str(tmp_path / "lock.json")
    reads = [{"phase": "engine_facts", "module": "host_info", "args": {"gather": ["os"]}}]
    taken = run_module("host_lock", {"state": "acquired", "run_id": "a", "path": lock, "reads": reads})
    assert not taken.get("failed"), taken
    # The answer is the survey's for the same call: what the module itself would have said.
    alone = run_module("host_info", {"gather": ["os"]}, check_mode=True)
    [answer] = taken["answers"]
    assert answer["phase"] == "engine_facts" and answer["module"] == "host_info" and taken["under_lock"] is True
    assert without_volatile(answer["result"]) == without_volatile(alone)
    # Kept (this run holds it already): read again, under the same lock.
    assert run_module("host_lock", {"state": "acquired", "run_id": "a", "path": lock, "reads": reads})["answers"]
    # Held by another run: refused before anything is read.
    refused = run_module("host_lock", {"state": "acquired", "run_id": "b", "path": lock, "reads": reads})
    assert refused["failed"] and "answers" not in refused
    # A dry run takes no lock, so it reads nothing under one; a release reads nothing either.
    assert "answers" not in run_module(
        "host_lock", {"state": "acquired", "run_id": "a", "path": lock, "reads": reads}, check_mode=True
    )
    assert "answers" not in run_module("host_lock", {"state": "released", "run_id": "a", "path": lock, "reads": reads})


def test_a_lock_reads_no_call_that_would_need_credentials_or_would_write(tmp_path):
    lock = str(tmp_path / "lock.json")
    for module in ("engine_config", "host_lock", "shell"):
        refused = run_module(
            "host_lock",
            {"state": "acquired", "run_id": "a", "path": lock, "reads": [{"module": module, "args": {}}]},
        )
        assert refused["failed"] and f"not {module}" in refused["msg"], refused
        assert not Path(lock).exists(), "the lock was taken for a call it refuses"


def test_answers_made_under_this_runs_lock_hold_in_that_real_run_only():
    made = {
        "under_lock": True,
        "answers": [{"module": "engine_info", "args": {"engine": "k3s"}, "result": {"version": "v1"}}],
    }
    found = answer_from(made, "engine_info", {"engine": "k3s"}, check_mode=False, diff_mode=False)
    assert found == {"version": "v1", "answered_by": "host_lock"}
    # Only for the same call; a failed read is the answer too (the host would fail the same way).
    assert answer_from(made, "engine_info", {"engine": "rke2"}, check_mode=False, diff_mode=False) is None
    made["answers"][0]["result"] = {"failed": True, "msg": "k3s is not installed"}
    assert answer_from(made, "engine_info", {"engine": "k3s"}, False, False)["msg"] == "k3s is not installed"
    # A lock's answers without the flag (its round read nothing for later) are not taken.
    assert answer_from({**made, "under_lock": False}, "engine_info", {"engine": "k3s"}, False, False) is None


def test_the_locks_round_asks_the_engine_read_of_engine_facts_as_that_phase_renders_it():
    from ansible_collections.cargoship.engine.plugins.plugin_utils._reads import lock_calls, read_of

    for host in ("c1", "w1"):
        variables = host_vars(host)
        [call] = lock_calls(templar(), variables)
        own = read_of("engine_facts", templar(), variables)
        assert (call["phase"], call["module"], call["args"]) == ("engine_facts", own["module"], own["args"])


@pytest.mark.parametrize(
    ("point", "read_under_lock"),
    [
        ("lock.after.worker", False),
        ("host_facts.before.worker", False),
        ("validate_hosts.after.controller", False),
        ("engine_facts.before.worker", False),
        ("engine_facts.after.worker", True),
        ("sync_worker.before.worker", True),
        ("lock.before.worker", True),
    ],
)
def test_a_hook_between_the_lock_and_the_engine_read_leaves_that_read_to_its_phase(point, read_under_lock):
    """A hook may change the engine: a read it runs before is made by the phase itself, after the hook."""
    from ansible_collections.cargoship.engine.plugins.plugin_utils._reads import lock_calls

    hooks = {point: [{"name": "h", "command": "true"}]}
    calls = lock_calls(templar(), host_vars("w1", cargoship_hooks=hooks))
    assert bool(calls) is read_under_lock, calls
    # Hooks not yet rendered to a mapping say nothing of where they run: nothing is read under the lock.
    assert lock_calls(templar(), host_vars("w1", cargoship_hooks="{{ my_hooks }}")) == []


def test_a_phase_run_alone_reads_under_the_lock_only_what_its_plan_reads():
    from ansible_collections.cargoship.engine.plugins.plugin_utils._reads import lock_calls

    # No lock in the plan of a read-only phase; a phase that changes hosts takes it, and reads the engine under
    # it only if engine_facts is in its plan.
    assert lock_calls(templar(), host_vars("w1"), selected="engine_facts") == []
    from ansible_collections.cargoship.engine.plugins.plugin_utils._phases import load_phases, plan

    for selected in ("sync_worker", "label_nodes"):
        planned = plan(load_phases(operation="engine-config-sync"), selected)
        calls = lock_calls(templar(), host_vars("w1"), selected=selected)
        assert [c["phase"] for c in calls] == (["engine_facts"] if "engine_facts" in planned else []), selected


def test_the_declarations_name_the_modules_the_survey_answers_for_without_importing_it():
    """plugin_utils/_reads.py checks a phase's read against the survey's modules by name, so that every
    cargoship command reads the declarations without Ansible's module code (about 0.1 s of each command)."""
    import subprocess
    import sys

    from ansible_collections.cargoship.engine.plugins.module_utils._survey import READERS
    from ansible_collections.cargoship.engine.plugins.plugin_utils._reads import SURVEY_MODULES

    assert sorted(SURVEY_MODULES) == sorted(READERS)
    probe = (
        "import sys\n"
        "from ansible_collections.cargoship.engine.plugins.plugin_utils._phases import load_phases\n"
        "assert load_phases()\n"
        "print(sorted(m for m in sys.modules if m == 'ansible' or m.startswith('ansible.')))\n"
    )
    root = Path(__file__).resolve().parents[2] / ".collections"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, env={"PYTHONPATH": str(root)}
    )
    assert done.stdout.strip() == "[]", done.stdout


@pytest.mark.parametrize(
    ("epoch", "skew", "answered", "least"),
    [
        # Reference 1000, the answer back at 1003: the host read its clock somewhere in between.
        (1047.0, 47.0, 1003.0, 44.0),  # 44 to 47 s ahead: at least 44
        (957.0, -43.0, 1003.0, -43.0),  # 43 to 46 s behind: at least 43
        (1001.5, 1.5, 1003.0, 0.0),  # -1.5 to +1.5 s: may be none at all
    ],
)
def test_a_hosts_clock_skew_is_the_least_its_round_trip_allows(epoch, skew, answered, least):
    narrowed = narrowed_clock({"epoch": epoch, "skew": skew}, answered)
    assert narrowed["skew"] == least
    assert narrowed["skew_range"] == [epoch - answered, skew]


def test_a_slow_call_is_not_counted_as_clock_skew():
    """host_info called 40 s after its reference moment (a slow connection, a busy control host): the module
    alone says 40 s; the answer as the control host takes it, timed by its return, says none, and the host
    checks pass. The same host with a clock 40 s off would show it whatever the call took (the test above)."""
    reference = time.time() - 40
    result = run_module("host_info", {"gather": ["clock"], "reference_epoch": reference})
    assert result["clock"]["skew"] >= 40
    timed = timed_answer("host_info", result, time.time())
    assert abs(timed["clock"]["skew"]) < 1
    assert problems({"h1": {**facts_of({"os": {"arch": "amd64"}}, timed), "private_address": "10.0.0.1"}}) == []
    surveyed = timed_survey({"answers": [{"module": "host_info", "args": {}, "result": result}]}, time.time())
    assert abs(surveyed["answers"][0]["result"]["clock"]["skew"]) < 1
