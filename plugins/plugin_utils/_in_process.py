# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's Kubernetes API modules, run in the calling process on the control host.

As a module, each call is a fresh Python on the control host that unpacks Ansible's module code and compiles it
again: about 0.4 s of CPU a call. An action plugin's worker (and a dry run's play assessment, which makes these
calls for every host of a play at once) has Ansible loaded already, so the module's own code runs there instead
(module_utils/_cluster_node.py, module_utils/_helm_chart_configs.py), its options checked against the module's
argument spec as the module would check them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ansible.module_utils.basic import missing_required_lib
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.module_utils.common.parameters import remove_values
from ansible.plugins.action import ActionBase

from ansible_collections.cargoship.engine.plugins.module_utils import _cluster_node, _helm_chart_configs
from ansible_collections.cargoship.engine.plugins.module_utils._outcome import Failed


@dataclass(frozen=True)
class InProcess:
    """A module whose state runs in the calling process: ``run(module, missing_library)``, its argument spec
    and the spec's rules across options."""

    run: Callable
    arguments: dict
    rules: dict = field(default_factory=dict)


MODULES = {
    "cluster_node": InProcess(
        _cluster_node.run_state,
        _cluster_node.ARGUMENTS,
        {"required_one_of": [_cluster_node.TARGETS], "mutually_exclusive": [_cluster_node.TARGETS]},
    ),
    "helm_chart_configs": InProcess(_helm_chart_configs.prune, _helm_chart_configs.ARGUMENTS),
}


class Task:
    """What a state reads of a module: its options, check mode and fail_json (which raises the backends' Failed,
    module_utils/_outcome.py, instead of ending the process)."""

    def __init__(self, params: dict, check_mode: bool):
        self.params = params
        self.check_mode = check_mode

    @staticmethod
    def fail_json(msg: str = "", **result):
        raise Failed(msg, **result)


def outcome(name: str, params: dict, check_mode: bool, no_log_values) -> dict:
    """The result of module ``name``'s state on options already checked against its spec; a credential given
    as an option (api_key) is kept out of it, as a module's result would keep it."""
    try:
        result = MODULES[name].run(Task(params, check_mode), missing_required_lib)
    except Failed as exc:
        result = exc.as_result()
    result.setdefault("changed", False)
    return remove_values(result, no_log_values)


def run_module(name: str, args: dict, check_mode: bool) -> dict:
    """Module ``name`` called with ``args``, as Ansible would run it on the control host, in this process: a
    failed result naming every wrong option, or the state's result."""
    module = MODULES[name]
    checked = ArgumentSpecValidator(module.arguments, **module.rules).validate(args)
    if checked.error_messages:
        return {"failed": True, "changed": False, "msg": "; ".join(checked.error_messages)}
    return outcome(name, checked.validated_parameters, check_mode, checked._no_log_values)


class InProcessAction(ActionBase):
    """The action plugin of a module in MODULES (``MODULE``): its state in the task's own process, whatever host
    the task is for; a wrong option fails the task, naming every one, as the module's argument spec would."""

    MODULE = ""
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        self._supports_check_mode = True
        result = super().run(tmp, task_vars)
        module = MODULES[self.MODULE]
        validation, params = self.validate_argument_spec(module.arguments, **module.rules)
        return {**result, **outcome(self.MODULE, params, bool(self._task.check_mode), validation._no_log_values)}
