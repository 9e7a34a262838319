from __future__ import annotations

import pytest
import yaml

from ansible_collections.cargoship.engine.plugins.plugin_utils import _hooks
from ansible_collections.cargoship.engine.plugins.plugin_utils._phases import load_phases

PHASES = load_phases(operation="engine-config-sync")


@pytest.mark.parametrize(
    ("hooks", "message"),
    [
        (
            {"sync_worker.before.workr": [{"name": "x", "command": "true"}]},
            "not a hook point (did you mean sync_worker.before.worker?)",
        ),
        ({"cluster_ready": []}, "expected a non-empty list"),
        ({"cluster_ready": [{"command": "true"}]}, 'cargoship_hooks["cluster_ready"][0].name: required'),
        ({"cluster_ready": [{"name": "x"}]}, "give exactly one of command and tasks"),
        ({"cluster_ready": [{"name": "x", "command": "a", "tasks": "b"}]}, "give exactly one of command and tasks"),
        (
            {"cluster_ready": [{"name": "x", "command": "a", "run_on": "elsewhere"}]},
            ".run_on: node (the default) or control",
        ),
        ({"cluster_ready": [{"name": "x", "comand": "a"}]}, ".comand: unknown key (did you mean 'command'?)"),
        (
            {"cluster_ready": [{"name": "x", "command": "a", "may_fail": "yes"}]},
            ".may_fail: expected true or false, got a string",
        ),
    ],
)
def test_bad_hooks_are_rejected_naming_the_key_path(hooks, message):
    with pytest.raises(ValueError) as error:
        _hooks.validate(hooks, PHASES)
    assert message in str(error.value)


def test_a_hooks_task_file_must_be_on_the_control_host_by_its_absolute_path(tmp_path):
    """Read when the hook fires, in the middle of a rollout: a file that is not there, or a relative path
    (which include_tasks would look for inside the hooks role), is an input error before the run."""
    present = tmp_path / "smoke.yml"
    present.write_text("- ansible.builtin.ping:\n")
    hooks = {
        "cluster_ready": [
            {"name": "present", "tasks": str(present)},
            {"name": "missing", "tasks": str(tmp_path / "missing.yml")},
            {"name": "relative", "tasks": "hooks/smoke.yml"},
            {"name": "blank", "command": "  "},
        ]
    }
    assert _hooks.problems(hooks, PHASES, check_files=True) == [
        f'cargoship_hooks["cluster_ready"][1].tasks: no such file on the control host: {tmp_path}/missing.yml',
        'cargoship_hooks["cluster_ready"][2].tasks: give the task file\'s absolute path on the control host, not '
        "'hooks/smoke.yml' (a relative path would be looked for inside cargoship's own hooks role)",
        'cargoship_hooks["cluster_ready"][3].command: empty',
    ]
    # In the middle of a run (the phase steps' own check), files are not looked at again.
    assert len(_hooks.problems(hooks, PHASES)) == 1


def test_an_unquoted_on_key_gets_a_clear_error():
    hooks = yaml.safe_load("cluster_ready:\n  - name: x\n    command: a\n    on: control\n")
    with pytest.raises(ValueError) as error:
        _hooks.validate(hooks, PHASES)
    assert "write run_on, not on" in str(error.value)


def test_steps_are_the_same_for_every_host_and_in_the_documented_order():
    hooks = {
        "detect_os.before.worker": [{"name": "a", "command": "x"}],
        "sync_worker.after.worker": [{"name": "b", "command": "y"}],
    }
    planned = [p for p in PHASES if p["name"] in ("connect", "detect_os", "sync_worker")]
    steps = _hooks.steps(planned, hooks, lambda phase: "main")
    assert [(s["role"], s["point"]) for s in steps] == [
        ("connect", ""),
        ("hooks", "detect_os.before"),  # for every host: a controller passes it through
        ("detect_os", ""),
        ("sync_worker", ""),  # its hooks run inside it, around each node's restart
    ]


def test_hook_points_cover_the_roles_each_phase_runs_for_and_cluster_ready():
    points = _hooks.all_hook_points(PHASES)
    assert "lock.before.controller" in points and "disconnect.after.worker" in points
    # The sync phases run in their own role's play: a hook of the other role there would never fire.
    assert "sync_controller.after.controller" in points and "sync_controller.after.worker" not in points
    assert "sync_worker.before.worker" in points and "sync_worker.before.controller" not in points
    # The per-node sync phases also have a window check, before anything is done to each node.
    assert "sync_worker.window.worker" in points and "sync_controller.window.controller" in points
    assert "lock.window.controller" not in points
    assert points[-1] == "cluster_ready" and len(points) == 10 * 4 + 2 * 3 + 1


def test_every_hook_problem_is_named_at_once_and_a_point_that_never_fires_says_why():
    hooks = {
        "sync_controller.before.worker": [{"name": "x", "command": "true"}],
        "sync_worker.after.workr": [{"name": "y", "command": "true"}],
        "cluster_ready": [{"command": "a", "tasks": "b.yml"}],
    }
    found = _hooks.problems(hooks, PHASES)
    assert found[0].startswith('cargoship_hooks["sync_controller.before.worker"]: never fires: sync_controller runs')
    assert "for controllers only" in found[0]
    assert "did you mean sync_worker.after.worker?" in found[1]
    assert any(".name: required" in f for f in found) and any("exactly one of command and tasks" in f for f in found)
    assert len(found) == 4
