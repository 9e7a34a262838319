# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Runs the engine_config module with the credentials of its desired state out of the logged arguments
(module_utils/_credentials.moved_out), or gives the answer of a host_survey in check mode. With
``from_inventory``, the desired state comes from the host's cargoship_* variables (plugin_utils/_run_options.py
spells it once)."""

from __future__ import annotations

from ansible_collections.cargoship.engine.plugins.module_utils._credentials import moved_out
from ansible_collections.cargoship.engine.plugins.plugin_utils._reads import with_inventory
from ansible_collections.cargoship.engine.plugins.plugin_utils._survey import SurveyAnsweredAction


class ActionModule(SurveyAnsweredAction):
    MODULE = "engine_config"

    def run(self, tmp=None, task_vars=None):
        if "credentials" in self._task.args:
            return {"failed": True, "msg": "credentials is set by cargoship.engine.engine_config itself"}
        return super().run(tmp, task_vars)

    def task_args(self, task_vars: dict) -> dict:
        args = dict(self._task.args)
        return with_inventory(args, self._templar, task_vars) if "from_inventory" in args else args

    def module_args(self, args: dict) -> dict:
        return moved_out(args)
