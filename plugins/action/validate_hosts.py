# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.cargoship.engine.plugins.plugin_utils._host_checks import ARCHITECTURES, facts_of, outcome


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("hosts", "max_clock_skew", "architectures"))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        hostvars = task_vars["hostvars"]
        facts = {}
        for host in self._task.args["hosts"]:
            variables = hostvars[host]
            facts[host] = facts_of(variables.get("detect_os_info"), variables.get("host_facts_info"))
        arches = self._task.args.get("architectures") or ARCHITECTURES
        result.update(outcome(facts, int(self._task.args.get("max_clock_skew", 30)), arches))
        return result
