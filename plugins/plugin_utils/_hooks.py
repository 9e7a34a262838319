# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""User hooks: where they may attach (hook points), what a hook may say, and in which order a host's
steps (hooks and phases) run. Read by input validation, the playbook's step lookup and the command."""

from __future__ import annotations

import difflib

NODE_ROLES = ("controller", "worker")
CLUSTER_READY = "cluster_ready"
# run_on, not "on": YAML 1.1 reads an unquoted `on:` key as the boolean true.
HOOK_KEYS = {"name": str, "command": str, "tasks": str, "run_on": str, "become": bool, "may_fail": bool}


def hook_points(phase: str) -> list[str]:
    return [f"{phase}.{when}.{role}" for when in ("before", "after") for role in NODE_ROLES]


def all_hook_points(phases: list[dict]) -> list[str]:
    return [point for phase in phases for point in hook_points(phase["name"])] + [CLUSTER_READY]


def validate(hooks: object, phases: list[dict]) -> None:
    """Raise ValueError naming the key path of the first problem in ``cargoship_hooks``."""
    if not isinstance(hooks, dict):
        raise ValueError(
            f"cargoship_hooks: expected a mapping of hook point to a list of hooks, got {type(hooks).__name__}"
        )
    points = all_hook_points(phases)
    for point, entries in hooks.items():
        where = f'cargoship_hooks["{point}"]'
        if point not in points:
            hint = difflib.get_close_matches(str(point), points, n=1, cutoff=0.6)
            raise ValueError(
                f"{where}: not a hook point"
                + (f" (did you mean {hint[0]}?)" if hint else "")
                + "; hook points are <phase>.before|after.controller|worker and cluster_ready"
            )
        if not isinstance(entries, list) or not entries:
            raise ValueError(f"{where}: expected a non-empty list of hooks")
        for index, hook in enumerate(entries):
            here = f"{where}[{index}]"
            if not isinstance(hook, dict):
                raise ValueError(f"{here}: expected a mapping with name and command or tasks")
            for key, value in hook.items():
                if key is True:
                    raise ValueError(
                        f"{here}: a key read as true: write run_on, not on (YAML reads an unquoted on as true)"
                    )
                if key not in HOOK_KEYS:
                    hint = difflib.get_close_matches(str(key), list(HOOK_KEYS), n=1, cutoff=0.6)
                    raise ValueError(f"{here}.{key}: unknown key" + (f" (did you mean '{hint[0]}'?)" if hint else ""))
                if not isinstance(value, HOOK_KEYS[key]):
                    raise ValueError(f"{here}.{key}: expected {HOOK_KEYS[key].__name__}, got {type(value).__name__}")
            if not hook.get("name"):
                raise ValueError(f"{here}.name: required (it names the hook in the report)")
            if ("command" in hook) == ("tasks" in hook):
                raise ValueError(f"{here}: give exactly one of command and tasks")
            if hook.get("run_on", "node") not in ("node", "control"):
                raise ValueError(f"{here}.run_on: node (the default) or control, not {hook['run_on']!r}")


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
