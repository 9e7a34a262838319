# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""User hooks: where they may attach (hook points), what a hook may say, and in which order a host's
steps (hooks and phases) run. Read by input validation, the playbook's step lookup and the command."""

from __future__ import annotations

import difflib
import os

NODE_ROLES = ("controller", "worker")
CLUSTER_READY = "cluster_ready"
# run_on, not "on": YAML 1.1 reads an unquoted `on:` key as the boolean true.
HOOK_KEYS = {"name": str, "command": str, "tasks": str, "run_on": str, "become": bool, "may_fail": bool}


def roles_of(phase: dict) -> tuple[str, ...]:
    """The node roles a phase runs for: a phase of the controllers' (workers') play reaches only
    controllers (workers), so a hook point of the other role would never fire."""
    return {"controllers": ("controller",), "workers": ("worker",)}.get(phase.get("play", ""), NODE_ROLES)


def moments(phase: dict) -> tuple[str, ...]:
    """When a phase's hooks may run: before and after it; a per-node phase also has its window check
    (``window``), asked before anything is done to each node: a hook that fails there refuses the node."""
    return ("window", "before", "after") if phase.get("per_node") else ("before", "after")


def hook_points(phase: dict) -> list[str]:
    return [f"{phase['name']}.{when}.{role}" for when in moments(phase) for role in roles_of(phase)]


def all_hook_points(phases: list[dict]) -> list[str]:
    return [point for phase in phases for point in hook_points(phase)] + [CLUSTER_READY]


def _kind(value: object) -> str:
    """A value's kind in YAML's words (never a Python or Ansible class name)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    for kind, name in (
        (int, "a number"),
        (float, "a number"),
        (str, "a string"),
        (dict, "a mapping"),
        (list, "a list"),
    ):
        if isinstance(value, kind):
            return name
    return "a value of another kind"


def problems(hooks: object, phases: list[dict], check_files: bool = False) -> list[str]:
    """Every problem in ``cargoship_hooks``, each naming its key path; with ``check_files``, task files that
    are not on the control host too (the input check, before the run; not again in the middle of it)."""
    if not isinstance(hooks, dict):
        return [f"cargoship_hooks: expected a mapping of hook point to a list of hooks, got {_kind(hooks)}"]
    points = all_hook_points(phases)
    found = []
    for point, entries in hooks.items():
        where = f'cargoship_hooks["{point}"]'
        if point not in points:
            phase, rest = str(point).partition(".")[::2]
            other = next((p for p in phases if p["name"] == phase and rest.split(".")[-1] in NODE_ROLES), None)
            if other is not None and rest.count(".") == 1 and rest.split(".")[0] in moments(other):
                found.append(
                    f"{where}: never fires: {phase} runs for {' and '.join(r + 's' for r in roles_of(other))} "
                    f"only (its hook points: {', '.join(hook_points(other))})"
                )
                continue
            hint = difflib.get_close_matches(str(point), points, n=1, cutoff=0.6)
            found.append(
                f"{where}: not a hook point"
                + (f" (did you mean {hint[0]}?)" if hint else "")
                + "; hook points are <phase>.before|after.controller|worker, <sync phase>.window.controller|worker "
                "and cluster_ready (cargoship phase list)"
            )
            continue
        if not isinstance(entries, list) or not entries:
            found.append(f"{where}: expected a non-empty list of hooks, got {_kind(entries)}")
            continue
        for index, hook in enumerate(entries):
            found += _hook_problems(f"{where}[{index}]", hook, check_files)
    return found


def _hook_problems(here: str, hook: object, check_files: bool) -> list[str]:
    if not isinstance(hook, dict):
        return [f"{here}: expected a mapping with name and command or tasks, got {_kind(hook)}"]
    found = []
    for key, value in hook.items():
        if key is True:
            found.append(f"{here}: a key read as true: write run_on, not on (YAML reads an unquoted on as true)")
        elif key not in HOOK_KEYS:
            hint = difflib.get_close_matches(str(key), list(HOOK_KEYS), n=1, cutoff=0.6)
            found.append(f"{here}.{key}: unknown key" + (f" (did you mean '{hint[0]}'?)" if hint else ""))
        elif not isinstance(value, HOOK_KEYS[key]):
            wanted = "true or false" if HOOK_KEYS[key] is bool else "a string"
            found.append(f"{here}.{key}: expected {wanted}, got {_kind(value)}")
    if not hook.get("name"):
        found.append(f"{here}.name: required (it names the hook in the report)")
    if ("command" in hook) == ("tasks" in hook):
        found.append(f"{here}: give exactly one of command and tasks")
    if hook.get("run_on", "node") not in ("node", "control"):
        found.append(f"{here}.run_on: node (the default) or control, not {hook['run_on']!r}")
    command, tasks = hook.get("command"), hook.get("tasks")
    if isinstance(command, str) and not command.strip():
        found.append(f"{here}.command: empty")
    if isinstance(tasks, str) and check_files:
        # Read on the control host when the hook fires, mid-rollout: a file that is not there is known now.
        if not (tasks.startswith("~") or os.path.isabs(tasks)):
            found.append(
                f"{here}.tasks: give the task file's absolute path on the control host, not {tasks!r} (a relative "
                "path would be looked for inside cargoship's own hooks role)"
            )
        elif not os.path.isfile(os.path.expanduser(tasks)):
            found.append(f"{here}.tasks: no such file on the control host: {tasks}")
    return found


def validate(hooks: object, phases: list[dict]) -> None:
    """Raise ValueError naming the key path of every problem in ``cargoship_hooks``."""
    found = problems(hooks, phases)
    if found:
        raise ValueError("; ".join(found))


def steps(planned: list[dict], hooks: dict, entry_of) -> list[dict]:
    """A host's steps through the planned phases, hooks in their documented order: for each phase, its
    ``before`` hooks, the phase, its ``after`` hooks. A hook step is there for every host whenever
    any node role has hooks at that point (a host with none for its own role just passes it), so
    all hosts have the same steps and move through them together: a phase's before-hooks finish on
    every node before the phase starts anywhere. Sync phases run their hooks themselves, around
    each node's restart. ``entry_of(phase)`` is the gate's answer.

    Steps must be the same for every host, variables included: Ansible runs a dynamic include
    together on all hosts only when it is the same include. So a hook step names ``<phase>.<when>``
    and the hooks role adds the host's own node role."""
    result = []
    for phase in planned:
        entry = entry_of(phase)
        if entry == "none":
            continue
        # A per-node phase (declared per_node) fires its hooks itself, around each node's own restart.
        around = not phase.get("per_node")
        for when in ("before", "after"):
            if when == "after":
                result.append({"role": phase["name"], "entry": entry, "point": ""})
            if around and any(hooks.get(f"{phase['name']}.{when}.{role}") for role in NODE_ROLES):
                result.append({"role": "hooks", "entry": "main", "point": f"{phase['name']}.{when}"})
    return result
