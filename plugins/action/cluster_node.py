# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""cluster_node on the control host, in the task's own process.

As a module, each call was a fresh Python on the control host that unpacked Ansible's module code and compiled
it again: about a quarter of a second of CPU, three or four times per node and run (a drain, a Ready wait, a
safe-to-stop check), on a control host that drives hundreds of nodes. The state runs here with the same code
(module_utils/_cluster_node.py), its options checked against the module's own argument spec."""

from __future__ import annotations

from ansible.module_utils.basic import missing_required_lib
from ansible.module_utils.common.parameters import remove_values
from ansible.plugins.action import ActionBase

from ansible_collections.cargoship.engine.plugins.module_utils._cluster_node import ARGUMENTS, TARGETS, run_state


class Failed(Exception):
    """fail_json's result: the state stops here."""

    def __init__(self, result: dict):
        super().__init__(result.get("msg"))
        self.result = result


class Task:
    """What the handlers of module_utils/_kube_nodes.py read of a module."""

    def __init__(self, params: dict, check_mode: bool):
        self.params = params
        self.check_mode = check_mode

    @staticmethod
    def fail_json(**result):
        raise Failed(result)


class ActionModule(ActionBase):
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        self._supports_check_mode = True
        result = super().run(tmp, task_vars)
        # Fails the task, naming every wrong option, as the module's argument spec would.
        validation, params = self.validate_argument_spec(
            ARGUMENTS, required_one_of=[TARGETS], mutually_exclusive=[TARGETS]
        )
        try:
            outcome = run_state(Task(params, bool(self._task.check_mode)), missing_required_lib)
        except Failed as exc:
            outcome = {**exc.result, "failed": True}
        outcome.setdefault("changed", False)
        # A credential given as an option (api_key) is kept out of the result, as a module's would be.
        return {**result, **remove_values(outcome, validation._no_log_values)}
