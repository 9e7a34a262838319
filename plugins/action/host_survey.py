# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Runs host_survey with the credentials of its engine_config calls out of the logged arguments; without
calls, the reads the run's phases declare (plugin_utils/_reads.py)."""

from __future__ import annotations

import time

from ansible.plugins.action import ActionBase
from ansible.utils.vars import merge_hash

from ansible_collections.cargoship.engine.plugins.module_utils._credentials import calls_moved_out
from ansible_collections.cargoship.engine.plugins.plugin_utils._reads import survey_calls
from ansible_collections.cargoship.engine.plugins.plugin_utils._survey import timed_survey


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("calls", "selected"))

    def run(self, tmp=None, task_vars=None):
        self._supports_check_mode = True
        result = super().run(tmp, task_vars)
        calls = self._task.args.get("calls")
        if calls is None:
            # The reads the run's phases declare, rendered for this host as each phase renders its own.
            try:
                calls = survey_calls(
                    self._templar,
                    task_vars,
                    bool(self._play_context.check_mode),
                    self._task.args.get("selected"),
                    applying_plan=task_vars.get("cargoship_plan_file") is not None,
                )
            except ValueError as exc:
                return {**result, "failed": True, "msg": str(exc)}
        calls, credentials = calls_moved_out(calls)
        module_result = self._execute_module(
            module_name="cargoship.engine.host_survey",
            module_args={"calls": calls, "credentials": credentials},
            task_vars=task_vars,
        )
        module_result = timed_survey(module_result, time.time())
        # Which answers a later task may take depends on whether the survey was made in a dry run (_survey.py).
        return merge_hash(result, {**module_result, "dry_run": bool(self._play_context.check_mode)})
