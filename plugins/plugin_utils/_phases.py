# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Phase declarations (``roles/<phase>/vars/main.yml``) and the dry-run gate that follows from them.

Read by the ``phase_steps`` lookup (which entry point of a phase role a run includes), the report
callback and the ``cargoship`` command, so all of them agree on every phase.
"""

from __future__ import annotations

import functools
import glob
import os

import yaml

DRY_RUN_LABELS = ("runs, reads only", "reported, not run", "runs its own dry-run path")
# The plays of an operation's playbook, in the order they run; each phase declares the one it runs in.
PLAYS = ("prepare", "controllers", "workers", "finish")
SAFE_IN_DRY_RUN = ("runs, reads only", "runs its own dry-run path")
# Where a dry run does a phase's part: its own tasks on each host (the connect phase's one round to the
# hosts), its own tasks once for the play (they already act once, on the control host or the first
# controller), or, by default, in the play's assessment on the control host for all of the play's hosts
# at once (plugin_utils/_dry_run.py), from the survey's answers.
DRY_RUN_SCOPES = ("each host", "once", "play")
ROLES_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "roles")


def load_phases(roles_dir: str = ROLES_DIR, operation: str | None = None) -> list[dict]:
    """Every phase declaration, sorted by operation and order."""
    phases = [dict(p) for p in _declarations(os.path.realpath(roles_dir))]
    return [p for p in phases if operation is None or p["operation"] == operation]


# libyaml's parser where PyYAML has it (as Ansible's own loader uses it): the declarations are read by every
# cargoship command and every ansible-playbook it starts, a third of the time of the pure-Python parser.
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@functools.lru_cache(maxsize=8)
def _declarations(roles_dir: str) -> tuple[dict, ...]:
    """Read once per process: the gate is asked for every phase on every host. Ansible forks its
    workers from the process whose report callback has already read them, so workers inherit them."""
    phases = []
    for path in glob.glob(os.path.join(roles_dir, "*", "vars", "main.yml")):
        role_dir = os.path.dirname(os.path.dirname(path))
        name = os.path.basename(role_dir)
        with open(path, encoding="utf-8") as handle:
            declaration = (yaml.load(handle, Loader=SAFE_LOADER) or {}).get(f"{name}_phase")
        if not declaration:
            continue
        label = declaration.get("dry_run") or "reported, not run"
        if label not in DRY_RUN_LABELS:
            raise ValueError(f"{path}: dry_run must be one of {', '.join(DRY_RUN_LABELS)}, not {label!r}")
        scope = declaration.get("dry_run_scope", "play")
        if scope not in DRY_RUN_SCOPES:
            raise ValueError(f"{path}: dry_run_scope must be one of {', '.join(DRY_RUN_SCOPES)}, not {scope!r}")
        if declaration.get("play") not in PLAYS:
            raise ValueError(f"{path}: play must be one of {', '.join(PLAYS)}, not {declaration.get('play')!r}")
        phases.append(
            {
                "name": name,
                "operation": declaration["operation"],
                "order": int(declaration["order"]),
                "play": declaration["play"],
                "title": declaration["title"],
                "description": " ".join(str(declaration["description"]).split()),
                "dry_run_label": label,
                "housekeeping": bool(declaration.get("housekeeping", False)),
                "unassessed_reason": declaration.get("unassessed_reason", "it declares no read-only assessment"),
                "assessment": declaration.get("assessment", ""),
                "needs": list(declaration.get("needs") or []),
                "changes_hosts": bool(declaration.get("changes_hosts", False)),
                "per_node": bool(declaration.get("per_node", False)),
                "runs_after_failure": bool(declaration.get("runs_after_failure", False)),
                # A dry run assesses it (says what it would do) where it declares its assessment.
                "has_assessment": bool(declaration.get("assessment")),
                "dry_run_scope": scope,
                "read": declaration.get("read"),
                # takes (the phase that locks the hosts) or releases (the one that unlocks them); else empty.
                "run_lock": declaration.get("run_lock", ""),
            }
        )
        if declaration.get("run_lock", "") not in ("", "takes", "releases"):
            raise ValueError(f"{path}: run_lock must be takes or releases, not {declaration['run_lock']!r}")
        if declaration.get("read") is not None:
            from ansible_collections.cargoship.engine.plugins.plugin_utils._reads import problems

            found = problems(name, declaration["read"])
            if found:
                raise ValueError(f"{path}: " + "; ".join(found))
    phases.sort(key=lambda p: (p["operation"], p["order"]))
    return tuple(phases)


class UnknownPhase(ValueError):
    """A phase name that no role declares."""


def plan(phases: list[dict], selected: str | None) -> list[str]:
    """The phases a run goes through, in order: all of them, or one selected phase with the phases it
    needs, the lock around it if it changes hosts, and disconnect."""
    names = [p["name"] for p in phases]
    if not selected:
        return names
    by_name = {p["name"]: p for p in phases}
    if selected not in by_name:
        raise UnknownPhase(f"unknown phase {selected!r}; the phases are: {', '.join(names)}")
    chosen = {selected, "disconnect", *by_name[selected]["needs"]}
    if by_name[selected]["changes_hosts"]:
        chosen |= {"lock", "unlock"}
    return [name for name in names if name in chosen]


def entry_point(phase: dict, check_mode: bool) -> str:
    """``main`` (run it), ``assess`` (its read-only assessment) or ``none`` (reported unassessed).

    A dry run runs a phase only if it declares it safe; a phase added later without a declaration is
    therefore only ever assessed, or not touched at all.
    """
    if not check_mode or phase["dry_run_label"] in SAFE_IN_DRY_RUN:
        return "main"
    return "assess" if phase["has_assessment"] else "none"


FINISH = "finish"  # the play where the cluster_ready stage comes first


def step_scope(step: dict, by_name: dict[str, dict]) -> str:
    """Where a dry run does a step (see DRY_RUN_SCOPES): a phase's by its declaration; its hooks with it
    where it runs on each host, else in the play's assessment (which lists them for every host); the
    cluster_ready stage once (it acts on the first controller only)."""
    if step["role"] != "hooks":
        return by_name[step["role"]]["dry_run_scope"]
    if step["entry"] == "cluster_ready":
        return "once"
    phase = by_name.get(step["point"].split(".", 1)[0])
    return "each host" if phase is not None and phase["dry_run_scope"] == "each host" else "play"


def play_steps(
    declared: list[dict],
    play: str,
    selected: str | None,
    hooks: dict,
    check_mode: bool,
    stopped: bool = False,
    scope: str = "",
) -> list[dict]:
    """A host's steps in one play of the playbook: the planned phases that declare this play, in their
    declared order, each with its hooks; in the finish play, first the cluster_ready stage when the
    run includes a per-node phase. With ``stopped`` (a phase failed), only the phases declared
    ``runs_after_failure`` (releasing the locks, cleaning up), without hooks. In a dry run, ``scope``
    keeps only the steps a dry run does there (step_scope); empty keeps them all. Raises UnknownPhase
    or ValueError (a bad hook) before any host is touched."""
    from ansible_collections.cargoship.engine.plugins.plugin_utils import _hooks

    if play not in PLAYS:
        raise ValueError(f"play must be one of {', '.join(PLAYS)}, not {play!r}")
    planned = plan(declared, selected)
    if stopped:
        return [
            {"role": p["name"], "entry": entry_point(p, check_mode), "point": ""}
            for p in declared
            if p["play"] == play
            and p["name"] in planned
            and p["runs_after_failure"]
            and entry_point(p, check_mode) != "none"
        ]
    _hooks.validate(hooks, declared)
    phases = [p for p in declared if p["play"] == play and p["name"] in planned]
    steps = _hooks.steps(phases, hooks, lambda phase: entry_point(phase, check_mode))
    per_node = any(p["per_node"] for p in declared if p["name"] in planned)
    if play == FINISH and hooks.get(_hooks.CLUSTER_READY) and per_node:
        # Every host gets the step (the same include for all); it acts on the first controller only.
        steps.insert(0, {"role": "hooks", "entry": "cluster_ready", "point": _hooks.CLUSTER_READY})
    if check_mode and scope:
        by_name = {p["name"]: p for p in declared}
        steps = [step for step in steps if step_scope(step, by_name) == scope]
    return steps
