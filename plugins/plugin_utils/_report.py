# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The run report: phases in declared order, each with its dry-run label, status and per-host changes.

Built from task results by the ``cargoship.engine.report`` callback; the ``cargoship`` command reads
the JSON the callback writes, so both entry points show the same report.
"""

from __future__ import annotations

import glob
import os

import yaml

DRY_RUN_LABELS = ("runs, reads only", "reported, not run", "runs its own dry-run path")
ROLES_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "roles")


def load_phases(roles_dir: str = ROLES_DIR, operation: str | None = None) -> list[dict]:
    """Every phase declaration (``roles/<phase>/vars/main.yml``), sorted by operation and order."""
    phases = []
    for path in glob.glob(os.path.join(roles_dir, "*", "vars", "main.yml")):
        name = os.path.basename(os.path.dirname(os.path.dirname(path)))
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
            }
        )
    phases.sort(key=lambda p: (p["operation"], p["order"]))
    return [p for p in phases if operation is None or p["operation"] == operation]


def change_of(item: object) -> object:
    """One change as the report shows it: a short string, or a file change with its masked diff."""
    if isinstance(item, dict) and "path" in item:
        entry = {"file": item["path"], "action": item.get("action", "update")}
        if item.get("diff"):
            entry["diff"] = item["diff"]
        return entry
    return str(item)


class RunReport:
    def __init__(self, operation: str, dry_run: bool, roles_dir: str = ROLES_DIR):
        self.operation = operation
        self.dry_run = dry_run
        self.phases = load_phases(roles_dir, operation)
        self.by_name = {p["name"]: p for p in self.phases}
        self.current: dict[str, str] = {}
        # phase -> host -> {"mode", "changes", "failed", "messages"}
        self.hosts: dict[str, dict[str, dict]] = {p["name"]: {} for p in self.phases}

    def _entry(self, phase: str, host: str) -> dict:
        return self.hosts[phase].setdefault(host, {"mode": None, "changes": [], "failed": False, "messages": []})

    def result(self, host: str, task_name: str, result: dict, status: str) -> None:
        """Feed one task result (``status``: ok, changed, failed, unreachable, skipped)."""
        marker = result.get("cargoship_phase")
        if marker and marker.get("phase") in self.hosts:
            phase = marker["phase"]
            entry = self._entry(phase, host)
            if marker.get("mode"):
                self.current[host] = phase
                entry["mode"] = marker["mode"]
                if marker.get("reason"):
                    entry["messages"].append(marker["reason"])
            entry["changes"] += [change_of(c) for c in marker.get("changes") or []]
            return
        phase = self.current.get(host)
        if phase is None:
            return
        entry = self._entry(phase, host)
        if status in ("failed", "unreachable"):
            entry["failed"] = True
            entry["messages"].append(f"{task_name}: {result.get('msg', status)}")
            return
        if status == "changed" or result.get("changed"):
            if entry["mode"] == "assess" and "changes" not in result:
                # An assessment reports its findings explicitly; a check-mode "changed" alone says nothing.
                return
            if result.get("changes"):
                entry["changes"] += [change_of(c) for c in result["changes"]]
            elif "results" in result:
                entry["changes"] += [task_name] * sum(1 for r in result["results"] if r.get("changed"))
            else:
                entry["changes"].append(task_name)

    def host_status(self, phase: dict, entry: dict) -> str:
        if entry["failed"]:
            return "failed"
        if entry["mode"] in ("unassessed", "disabled"):
            return {"unassessed": "unassessed", "disabled": "skipped"}[entry["mode"]]
        if phase["dry_run_label"] == "runs, reads only":
            return "ran"
        if not entry["changes"]:
            return "nothing to do"
        return "would run" if self.dry_run and entry["mode"] == "assess" else "ran"

    def as_dict(self) -> dict:
        phases = []
        for phase in self.phases:
            hosts = {
                host: {
                    "status": self.host_status(phase, entry),
                    "changes": entry["changes"],
                    **({"messages": entry["messages"]} if entry["messages"] else {}),
                }
                for host, entry in sorted(self.hosts[phase["name"]].items())
            }
            statuses = {h["status"] for h in hosts.values()}
            for status in ("failed", "would run", "ran", "nothing to do", "unassessed", "skipped"):
                if status in statuses:
                    break
            else:
                status = "skipped"
            phases.append(
                {**{k: phase[k] for k in ("name", "title", "dry_run_label")}, "status": status, "hosts": hosts}
            )
        work_found = any(p["status"] == "would run" and not self.by_name[p["name"]]["housekeeping"] for p in phases)
        return {"operation": self.operation, "dry_run": self.dry_run, "work_found": work_found, "phases": phases}


def summary_line(phase: dict) -> str:
    parts = []
    for host, detail in phase["hosts"].items():
        if detail["changes"]:
            names = [c if isinstance(c, str) else f"{c['action']} {c['file']}" for c in detail["changes"]]
            parts.append(f"{host}: {'; '.join(names)}")
        elif detail.get("messages") and detail["status"] in ("failed", "unassessed"):
            parts.append(f"{host}: {detail['messages'][-1]}")
    return " | ".join(parts)


def render_text(report: dict) -> str:
    """A plain-text table, for ansible-playbook's output (the CLI renders the same data with rich)."""
    title = f"cargoship {report['operation']} - {'dry run' if report['dry_run'] else 'real run'}"
    rows = [("#", "phase", "dry run", "status", "hosts and changes")]
    for number, phase in enumerate(report["phases"], start=1):
        rows.append((str(number), phase["name"], phase["dry_run_label"], phase["status"], summary_line(phase)))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = [title, ""]
    for row in rows:
        lines.append("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:4])) + "  " + row[4])
    return "\n".join(lines)
