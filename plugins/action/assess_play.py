# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""assess_play: a dry run's assessment of one play for all of its hosts at once (plugin_utils/_dry_run.py)."""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.cargoship.engine.plugins.plugin_utils._dry_run import PlayAssessment
from ansible_collections.cargoship.engine.plugins.plugin_utils._in_process import MODULES
from ansible_collections.cargoship.engine.plugins.plugin_utils._in_process import run_module as run_in_process


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("play", "hosts", "selected", "hooks"))

    def run(self, tmp=None, task_vars=None):
        self._supports_check_mode = True
        result = super().run(tmp, task_vars)
        if not self._play_context.check_mode:
            return {**result, "failed": True, "msg": "assess_play is a dry run's: it runs in check mode only"}
        args = self._task.args
        hosts = list(args.get("hosts") or [])
        if not hosts:
            return {**result, "changed": False, "cargoship_assessed": []}
        hostvars = task_vars["hostvars"]

        def run_module(name: str, module_args: dict) -> dict:
            # The Kubernetes API calls (the node check, the drain assessment, the chart values to prune) run in
            # this process, as their action plugins do in a real run: no fresh Python per call.
            if name in MODULES:
                return run_in_process(name, module_args, check_mode=True)
            return self._execute_module(
                module_name=f"cargoship.engine.{name}", module_args=module_args, task_vars=task_vars
            )

        assessment = PlayAssessment(
            hosts, hostvars, hostvars[hosts[0]], run_module, str(args.get("selected") or ""), args.get("hooks")
        )
        try:
            result.update(assessment.run(str(args.get("play", ""))))
        except ValueError as exc:
            return {**result, "failed": True, "msg": str(exc)}
        return result
