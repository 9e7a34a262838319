# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""phase_read: a phase's declared read, rendered as the survey renders it (plugin_utils/_reads.py), answered
from the survey on the control host where the answer holds, else by the module on the host."""

from __future__ import annotations

from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase
from ansible.utils.vars import merge_hash

from ansible_collections.cargoship.engine.plugins.module_utils._credentials import moved_out
from ansible_collections.cargoship.engine.plugins.plugin_utils._reads import read_of
from ansible_collections.cargoship.engine.plugins.plugin_utils._survey import answer_from_comparison, answer_or_ask


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("phase", "survey", "host", "compared", "synced"))

    def run(self, tmp=None, task_vars=None):
        self._supports_check_mode = True
        result = super().run(tmp, task_vars)
        try:
            # Another host's read (a task delegated to it): rendered with that host's variables, as its survey was.
            host = self._task.args.get("host")
            hostvars = task_vars["hostvars"]
            variables = task_vars if not host else {**hostvars.raw_get(str(host)), "hostvars": hostvars}
            call = read_of(str(self._task.args.get("phase", "")), self._templar, variables)
        except ValueError as exc:
            return {**result, "failed": True, "msg": str(exc)}
        args = moved_out(call["args"]) if call["module"] == "engine_config" else call["args"]
        synced = boolean(self._task.args.get("synced", False), strict=False)
        found = answer_from_comparison(call["module"], args, self._task.args.get("compared"), synced)
        if found is None:
            found = answer_or_ask(self, call["module"], args, self._task.args.get("survey"), task_vars)
        return merge_hash(result, found)
