# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The run report: phases in declared order, each with its dry-run label, status and per-host changes.

Built from task results by the ``cargoship.engine.report`` callback; the ``cargoship`` command reads
the JSON the callback writes, so both entry points show the same report. How each phase ran (run,
assessed or unassessed) follows from the same gate the playbook uses, so no task has to say it.
"""

from __future__ import annotations

import json
import os
import re

from ansible_collections.cargoship.engine.plugins.plugin_utils._hooks import CLUSTER_READY
from ansible_collections.cargoship.engine.plugins.plugin_utils._node_progress import NodeProgress
from ansible_collections.cargoship.engine.plugins.plugin_utils._phases import (
    UnknownPhase,
    entry_point,
    load_phases,
    plan,
)

# The report's format: raised when a field is removed or changes meaning (docs/report.schema.json).
SCHEMA_VERSION = 1
HOOKS = "hooks"  # what the callback passes for a task of the hooks role outside any phase role


def collection_version() -> str:
    """The collection's version: its MANIFEST.json once installed, its galaxy.yml in a checkout."""
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    try:
        with open(os.path.join(root, "MANIFEST.json"), encoding="utf-8") as handle:
            return str(json.load(handle)["collection_info"]["version"])
    except (OSError, ValueError, KeyError):
        pass
    try:
        with open(os.path.join(root, "galaxy.yml"), encoding="utf-8") as handle:
            found = re.search(r"^version:\s*['\"]?([^'\"\s]+)", handle.read(), re.MULTILINE)
    except OSError:
        found = None
    return found.group(1) if found else "unknown"


def change_of(item: object) -> object:
    """One change as the report shows it: a short string, or a file change with its masked diff."""
    if isinstance(item, dict) and "path" in item:
        entry = {"file": item["path"], "action": item.get("action", "update")}
        if item.get("diff"):
            entry["diff"] = item["diff"]
        return entry
    return str(item)


class RunReport:
    def __init__(self, operation: str, dry_run: bool, phases: list[dict] | None = None):
        self.operation = operation
        self.dry_run = dry_run
        self.phases = phases if phases is not None else load_phases(operation=operation)
        self.by_name = {p["name"]: p for p in self.phases}
        self.seen_hosts: set[str] = set()
        self.selected: str | None = None
        # The hook point whose hooks a host is running, and the stages (cluster_ready) seen.
        self.hook_point: dict[str, str] = {}
        self.stages: dict[str, dict[str, dict]] = {}
        # phase -> host -> {"disabled", "changes", "failed", "messages"}
        self.hosts: dict[str, dict[str, dict]] = {p["name"]: {} for p in self.phases}
        self.nodes: dict[str, str] = {}  # inventory name -> node name, where they differ
        self.node_progress = NodeProgress()  # nodes whose sync window is open
        self.run_id = ""
        self.version = collection_version()
        # Whether a task of the collection reported (else the playbook was not cargoship's: no report).
        self.seen_cargoship = False
        # Failures outside any phase: the input's problems (validate_input), no host to work on (fleet).
        self.errors: list[dict] = []
        self.host_states: dict[str, str] = {}  # host -> ok, failed or unreachable
        self.inventory_args = "-i INVENTORY"  # how the recover command printed for a node names the inventory
        self.plan: dict = {}  # the reviewed plan this dry run wrote, or this run applied (run_plan)

    def _entry(self, phase: str, host: str) -> dict:
        table = self.hosts[phase] if phase in self.hosts else self.stages.setdefault(phase, {})
        return table.setdefault(host, {"disabled": False, "changes": [], "failed": False, "messages": []})

    def result(self, host: str, phase: str | None, task_name: str, result: dict, status: str) -> None:
        """Feed one task result of ``phase`` (``status``: ok, changed, failed, unreachable, skipped)."""
        self.seen_hosts.add(host)
        if status in ("ok", "changed") and isinstance(result.get("cargoship_plan"), dict):
            self.plan.update(
                {k: v for k, v in result["cargoship_plan"].items() if k in ("digest", "file", "written", "applied")}
            )
        if status == "unreachable":
            self.host_states[host] = "unreachable"
        elif status == "failed":
            self.host_states[host] = "unreachable" if self.host_states.get(host) == "unreachable" else "failed"
        else:
            self.host_states.setdefault(host, "ok")
        if status in ("ok", "changed"):
            self.node_progress.feed(host, result)
            self.run_id = (result.get("ansible_facts") or {}).get("connect_run_id") or self.run_id
        if isinstance(result.get("renamed"), dict):
            # Hosts whose node name is not their inventory name (the cluster_node known check says so).
            self.nodes.update(result["renamed"])
        marker = result.get("cargoship_phase")
        if marker and marker.get("phase", "") not in self.hosts:
            # The hooks role announces its hook point; what follows in that role belongs to it.
            self.hook_point[host] = marker["phase"]
        if phase == HOOKS:
            point = self.hook_point.get(host, "")
            phase = point if point == CLUSTER_READY else point.split(".", 1)[0]
        if phase not in self.hosts and phase != CLUSTER_READY:
            if status == "failed":
                self.note_error(host, result)
            return
        entry = self._entry(phase, host)
        for note in result.get("kept") or []:
            if note not in entry.setdefault("notes", []):
                entry["notes"].append(note)
        # What a restarted node was proven to run, and how (the engine_proof action).
        entry.setdefault("proven", []).extend(result.get("proven") or [])
        if status in ("failed", "unreachable"):
            entry["failed"] = True
            entry["messages"].append(f"{task_name}: {result.get('msg', status)}")
            if result.get("locked_by"):
                entry["locked_by"] = result["locked_by"]
            return
        if marker:
            if marker.get("mode") == "disabled":
                entry["disabled"] = True
                entry["messages"].append(marker.get("reason") or "disabled")
            entry["changes"] += [change_of(c) for c in marker.get("changes") or []]
            return
        if status == "changed" or result.get("changed"):
            if self.dry_run and "changes" not in result:
                # An assessment reports its findings explicitly; a check-mode "changed" alone says nothing.
                return
            if result.get("changes"):
                entry["changes"] += [change_of(c) for c in result["changes"]]
            elif "results" in result:
                entry["changes"] += [task_name] * sum(1 for r in result["results"] if r.get("changed"))
            else:
                entry["changes"].append(task_name)

    def note_error(self, host: str, result: dict) -> None:
        """A failure outside the phases: the input's problems (each with its hosts), or one message."""
        if isinstance(result.get("input_errors"), list):
            self.errors += [e for e in result["input_errors"] if e not in self.errors]
            return
        error = {"message": str(result.get("msg", "failed")), "hosts": [host]}
        same = next((e for e in self.errors if e["message"] == error["message"]), None)
        if same is None:
            self.errors.append(error)
        elif host not in same["hosts"]:
            same["hosts"].append(host)

    def host_status(self, phase: dict, entry: dict) -> str:
        if entry["failed"]:
            return "failed"
        if entry["disabled"]:
            return "skipped"
        if phase["dry_run_label"] == "runs, reads only":
            return "ran"
        if phase["housekeeping"] and not self.dry_run:
            return "ran"  # the run's own bookkeeping (its lock), which leaves no change behind
        if not entry["changes"]:
            return "nothing to do"
        return "would run" if self.dry_run else "ran"

    def stage_status(self, entry: dict) -> str:
        if entry["failed"]:
            return "failed"
        return ("would run" if self.dry_run else "ran") if entry["changes"] else "nothing to do"

    def as_dict(self) -> dict:
        phases = []
        try:
            planned = set(plan(self.phases, self.selected))
        except UnknownPhase:
            planned = set()  # the input check refused the run and says why: no phase was reached
        for phase in self.phases:
            entries = self.hosts[phase["name"]]
            disabled = next((e["messages"] for e in entries.values() if e["disabled"]), None)
            if phase["name"] not in planned:
                hosts = {}
            elif entry_point(phase, self.dry_run) == "none":
                reason = [phase["unassessed_reason"]]
                hosts = {
                    h: {"status": "unassessed", "changes": [], "messages": reason} for h in sorted(self.seen_hosts)
                }
            elif disabled is not None:
                # Switched off for the whole run (reported once): skipped wherever it was reached.
                hosts = {h: {"status": "skipped", "changes": [], "messages": disabled} for h in sorted(entries)}
            else:
                hosts = {
                    host: {
                        "status": self.host_status(phase, entry),
                        "changes": entry["changes"],
                        **({"messages": entry["messages"]} if entry["messages"] else {}),
                        **({"notes": entry["notes"]} if entry.get("notes") else {}),
                        **({"proven": entry["proven"]} if entry.get("proven") else {}),
                        **({"node": self.nodes[host]} if host in self.nodes else {}),
                        **({"locked_by": entry["locked_by"]} if entry.get("locked_by") else {}),
                    }
                    for host, entry in sorted(self.hosts[phase["name"]].items())
                }
            statuses = {h["status"] for h in hosts.values()}
            status = next(
                (s for s in ("failed", "would run", "ran", "nothing to do", "unassessed", "skipped") if s in statuses),
                "skipped",
            )
            phases.append(
                {**{k: phase[k] for k in ("name", "title", "dry_run_label")}, "status": status, "hosts": hosts}
            )
        work_found = any(p["status"] == "would run" and not self.by_name[p["name"]]["housekeeping"] for p in phases)
        report = {
            "schema_version": SCHEMA_VERSION,
            "operation": self.operation,
            "version": self.version,
            "run_id": self.run_id,
            "dry_run": self.dry_run,
            "work_found": work_found,
            "hosts": {host: {"status": state} for host, state in sorted(self.host_states.items())},
            "phases": phases,
        }
        if self.errors:
            report["errors"] = self.errors
        if self.selected:
            report["selected_phase"] = self.selected
        if self.nodes:
            report["nodes"] = dict(sorted(self.nodes.items()))
        if self.plan:
            report["plan"] = dict(self.plan)
        if self.node_progress.in_flight:
            report["nodes_left_mid_sync"] = self.node_progress.left_mid_sync(self.run_id, self.inventory_args)
        if self.stages:
            report["stages"] = [
                {
                    "name": name,
                    "status": next(
                        (
                            s
                            for s in ("failed", "would run", "ran")
                            if s in {self.stage_status(e) for e in hosts.values()}
                        ),
                        "nothing to do",
                    ),
                    "hosts": {
                        h: {"status": self.stage_status(e), "changes": e["changes"]} for h, e in sorted(hosts.items())
                    },
                }
                for name, hosts in self.stages.items()
            ]
        return report


def phase_lines(phase: dict) -> list[str]:
    """What a phase did or would do, a line per host with changes (or the reason it failed); for a
    phase unassessed or skipped everywhere, its reason once."""
    lines = []
    for host, detail in phase["hosts"].items():
        label = f"{host} (node {detail['node']})" if detail.get("node") else host
        if detail["changes"]:
            names = [c if isinstance(c, str) else f"{c['action']} {c['file']}" for c in detail["changes"]]
            lines.append(f"{label}: {'; '.join(names)}")
        elif detail.get("messages") and detail["status"] == "failed":
            lines.append(f"{label}: {detail['messages'][-1]}")
        lines += [f"{label}: {note}" for note in detail.get("notes") or []]
        lines += [f"{label}: proven {line}" for line in detail.get("proven") or []]
    if not lines and phase["status"] in ("unassessed", "skipped") and phase["hosts"]:
        lines.append(next(iter(phase["hosts"].values())).get("messages", [""])[0])
    return lines


def render_diffs(report: dict) -> str:
    """The masked diff of every file change in the report, per phase and host, as unified diffs."""
    blocks = []
    for phase in report["phases"]:
        for host, detail in phase["hosts"].items():
            for change in detail["changes"]:
                if isinstance(change, dict) and change.get("diff"):
                    diff = change["diff"] if change["diff"].endswith("\n") else change["diff"] + "\n"
                    blocks.append(f"# {phase['name']} on {host}: {change['action']} {change['file']}\n{diff}")
    return "".join(blocks)


COLUMNS = ("#", "phase", "dry run", "status", "hosts and changes")


def report_title(report: dict) -> str:
    return f"cargoship {report['operation']} - {'dry run' if report['dry_run'] else 'real run'}"


def report_rows(report: dict) -> list[tuple[str, str, str, str, list[str]]]:
    """The report's table, one row per phase then per stage: number, name, dry-run label, status, and
    the lines of hosts and changes. Every renderer (plain text here, the command's terminal table) draws these."""
    rows = [
        (str(number), phase["name"], phase["dry_run_label"], phase["status"], phase_lines(phase))
        for number, phase in enumerate(report["phases"], start=1)
    ]
    rows += [("", s["name"], "stage: hooks only", s["status"], phase_lines(s)) for s in report.get("stages", [])]
    return rows


SHOWN_HOSTS = 5


def hosts_text(hosts: list[str], every: int | None = None) -> str:
    """Hosts as a line names them: "every host" when they are all ``every`` of them, else the first few."""
    if every is not None and len(hosts) == every > 1:
        return "every host"
    more = f" and {len(hosts) - SHOWN_HOSTS} more" if len(hosts) > SHOWN_HOSTS else ""
    return ", ".join(hosts[:SHOWN_HOSTS]) + more


def error_lines(report: dict) -> list[str]:
    """The run's failures outside its phases (the input's problems first of all), a line each."""
    lines = []
    for error in report.get("errors") or []:
        hosts = error.get("hosts") or []
        where = [hosts_text(hosts)] if hosts else []
        where += [error["origin"]] if error.get("origin") else []
        lines.append(f"error: {error['message']}" + (f" ({'; '.join(where)})" if where else ""))
    return lines


def reached_no_phase(report: dict) -> bool:
    """The run ended before any phase reached a host (bad input, no host to work on)."""
    return all(h["status"] == "unassessed" for p in report["phases"] for h in p["hosts"].values())


NOTHING_RUN = "nothing was run on any host"


def render_text(report: dict) -> str:
    """The report as plain text, a line per phase that never folds (ansible-playbook's output, CI logs)."""
    title = report_title(report)
    errors = error_lines(report)
    if errors:
        title += "\n" + "\n".join(errors)
    if reached_no_phase(report):
        return f"{title}\n{NOTHING_RUN}"
    rows = [COLUMNS] + [(*row[:4], " | ".join(row[4])) for row in report_rows(report)]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = [title, ""]
    for row in rows:
        lines.append("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:4])) + "  " + row[4])
    return "\n".join(lines)
