# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Runs the engine_config module with the credentials of its desired state out of the logged arguments.

A module logs its arguments on the host (journal, syslog) before it can mask anything, and only an
argument marked no-log as a whole is kept out. The registries and chart values cannot be no-log as a
whole (their mirrors and settings belong in the diffs), so here, on the control host, each credential
is replaced by a numbered placeholder and its value travels in the module's no-log ``credentials``.
"""

from __future__ import annotations

from ansible.plugins.action import ActionBase
from ansible.utils.vars import merge_hash

from ansible_collections.cargoship.engine.plugins.module_utils import _credentials


def without_credentials(args: dict) -> dict:
    """The module arguments with every credential moved into ``credentials``."""
    found: list = []
    args = dict(args)
    if isinstance(args.get("registries"), dict):
        args["registries"] = _credentials.hide(args["registries"], "registries", found)
    if isinstance(args.get("chart_values"), dict):
        args["chart_values"] = {
            name: {**settings, "values": _credentials.hide(settings["values"], "chart_values", found)}
            if isinstance(settings, dict) and "values" in settings
            else settings
            for name, settings in args["chart_values"].items()
        }
    args["credentials"] = found
    return args


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        self._supports_check_mode = True
        result = super().run(tmp, task_vars)
        if "credentials" in self._task.args:
            return {**result, "failed": True, "msg": "credentials is set by cargoship.engine.engine_config itself"}
        module_result = self._execute_module(
            module_name="cargoship.engine.engine_config",
            module_args=without_credentials(self._task.args),
            task_vars=task_vars,
        )
        return merge_hash(result, module_result)
