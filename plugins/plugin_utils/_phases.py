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
SAFE_IN_DRY_RUN = ("runs, reads only", "runs its own dry-run path")
ROLES_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "roles")


def load_phases(roles_dir: str = ROLES_DIR, operation: str | None = None) -> list[dict]:
    """Every phase declaration, sorted by operation and order."""
    phases = [dict(p) for p in _declarations(os.path.realpath(roles_dir))]
    return [p for p in phases if operation is None or p["operation"] == operation]


@functools.lru_cache(maxsize=8)
def _declarations(roles_dir: str) -> tuple[dict, ...]:
    """Read once per process: the gate is asked for every phase on every host. Ansible forks its
    workers from the process whose report callback has already read them, so workers inherit them."""
    phases = []
    for path in glob.glob(os.path.join(roles_dir, "*", "vars", "main.yml")):
        role_dir = os.path.dirname(os.path.dirname(path))
        name = os.path.basename(role_dir)
        with open(path, encoding="utf-8") as handle:
            declaration = (yaml.safe_load(handle) or {}).get(f"{name}_phase")
        if not declaration:
            continue
        label = declaration.get("dry_run") or "reported, not run"
        if label not in DRY_RUN_LABELS:
            raise ValueError(f"{path}: dry_run must be one of {', '.join(DRY_RUN_LABELS)}, not {label!r}")
        phases.append(
            {
                "name": name,
                "operation": declaration["operation"],
                "order": int(declaration["order"]),
                "title": declaration["title"],
                "description": " ".join(str(declaration["description"]).split()),
                "dry_run_label": label,
                "housekeeping": bool(declaration.get("housekeeping", False)),
                "unassessed_reason": declaration.get("unassessed_reason", "it declares no read-only assessment"),
                "assessment": declaration.get("assessment", ""),
                "needs": list(declaration.get("needs") or []),
                "changes_hosts": bool(declaration.get("changes_hosts", False)),
                "per_node": bool(declaration.get("per_node", False)),
                "has_assessment": os.path.exists(os.path.join(role_dir, "tasks", "assess.yml")),
            }
        )
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
