# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: report
type: aggregate
short_description: The cargoship run report, for every entry point alike
version_added: 0.1.0
description:
  - At the end of a cargoship playbook, prints every phase of the operation in order with its
    dry-run label, its status (ran, would run, nothing to do, unassessed, skipped, failed) and what
    it changed or would change on which host.
  - Writes the same report as JSON when O(report_json) is set.
requirements:
  - enable in ansible.cfg (C(callbacks_enabled = cargoship.engine.report)) or with ANSIBLE_CALLBACKS_ENABLED
options:
  report_json:
    description: File to write the report to, as JSON.
    type: path
    env:
      - name: CARGOSHIP_REPORT_JSON
    ini:
      - section: cargoship
        key: report_json
  operation:
    description: The operation the playbook runs.
    type: str
    default: engine-config-sync
    env:
      - name: CARGOSHIP_OPERATION
"""

import json
import os
import shlex
import tempfile

from ansible import context
from ansible.plugins.callback import CallbackBase

from ansible_collections.cargoship.engine.plugins.plugin_utils._report import HOOKS, RunReport, render_text


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "cargoship.engine.report"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self.report: RunReport | None = None

    def v2_playbook_on_start(self, playbook):
        self.report = RunReport(self.get_option("operation"), bool(context.CLIARGS.get("check")))
        sources = context.CLIARGS.get("inventory") or ()
        if sources:
            self.report.inventory_args = " ".join(f"-i {shlex.quote(str(s))}" for s in sources)

    def v2_playbook_on_play_start(self, play):
        if self.report is not None:
            # One phase run alone (cargoship phase run, or -e cargoship_phase=NAME): the rest is skipped.
            extra_vars = play.get_variable_manager().extra_vars
            self.report.selected = extra_vars.get("cargoship_phase") or None
            self.report.run_id = self.report.run_id or str(extra_vars.get("cargoship_run_id") or "")

    def v2_runner_on_skipped(self, result):
        # A host that only skipped a phase's tasks was still there: the phase had nothing to do on it.
        if self.report is not None:
            self.report.seen_cargoship = self.report.seen_cargoship or self.ours(result._task)
            self.report.result(
                result._host.get_name(), self.phase_of(result._task), result._task.name or "", {}, "skipped"
            )

    def _feed(self, result, status):
        if self.report is None:
            return
        data = result._result
        self.report.seen_cargoship = self.report.seen_cargoship or self.ours(result._task)
        if result._task.check_mode and not self.report.dry_run:
            # A plan computed in check mode during a real run: what it found is reported by the steps that act
            # on it; only its notes (files kept as they are) are the plan's own to report.
            if status == "ok" and data.get("kept"):
                self.report.result(
                    result._host.get_name(),
                    self.phase_of(result._task),
                    result._task.name,
                    {"kept": data["kept"]},
                    "ok",
                )
            return
        if isinstance(data.get("cargoship_assessed"), list):
            # A dry run's assessment of a play (assess_play): each host's result of each phase, as its task gives it.
            for item in data["cargoship_assessed"]:
                self.report.result(item["host"], item["phase"], item["task"], item["result"], item["status"])
            return
        if status == "ok" and data.get("changed"):
            status = "changed"
        host = result._host.get_name()
        self.report.result(host, self.phase_of(result._task), result._task.name or result._task.action, data, status)

    @staticmethod
    def ours(task) -> bool:
        """A task of this collection: its module's, or inside one of its roles."""
        if str(task.action).startswith("cargoship.engine."):
            return True
        role = getattr(task, "_role", None)
        return role is not None and role.get_name().startswith("cargoship.engine.")

    def phase_of(self, task):
        """The phase a task belongs to: the nearest enclosing role that is a phase (shared roles such as
        node_sync count for the phase that included them)."""
        node, in_hooks = task, False
        while node is not None:
            role = getattr(node, "_role", None)
            if role is not None:
                name = role.get_name().rsplit(".", 1)[-1]
                if name in self.report.by_name:
                    return name
                in_hooks = in_hooks or name == HOOKS
            node = getattr(node, "_parent", None)
        return HOOKS if in_hooks else None

    def v2_runner_on_ok(self, result):
        self._feed(result, "ok")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        if not ignore_errors:
            self._feed(result, "failed")

    def v2_runner_on_unreachable(self, result):
        self._feed(result, "unreachable")

    def v2_playbook_on_stats(self, stats):
        if self.report is None or not self.report.seen_cargoship:
            return  # a playbook that ran nothing of cargoship's has nothing to report
        report = self.report.as_dict()
        self._display.display("\n" + render_text(report))
        path = self.get_option("report_json")
        if path:
            # It holds diffs of engine files: private from creation, also when it replaces an older file.
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), prefix=".cargoship-report-")
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(report, handle, indent=2)
            os.replace(tmp, path)
