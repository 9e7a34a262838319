# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""cluster_node on the control host, in the task's own process.

As a module, each call was a fresh Python on the control host that unpacked Ansible's module code and compiled
it again: about a quarter of a second of CPU, three or four times per node and run (a drain, a Ready wait, a
safe-to-stop check), on a control host that drives hundreds of nodes. The state runs here with the same code
(module_utils/_cluster_node.py), its options checked against the module's own argument spec."""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.cargoship.engine.plugins.plugin_utils._in_process import MODULES, outcome


class ActionModule(ActionBase):
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        self._supports_check_mode = True
        result = super().run(tmp, task_vars)
        module = MODULES["cluster_node"]
        # Fails the task, naming every wrong option, as the module's argument spec would.
        validation, params = self.validate_argument_spec(module.arguments, **module.rules)
        return {**result, **outcome("cluster_node", params, bool(self._task.check_mode), validation._no_log_values)}
