# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import difflib

from ansible.errors import AnsibleError
from ansible.plugins.action import ActionBase

from ansible_collections.cargoship.engine.plugins.module_utils._desired_state import (
    CONCURRENCY,
    DNS_LABEL,
    InputError,
    validate,
)

DESIRED = {
    "cargoship_engine": "engine",
    "cargoship_registries": "registries",
    "cargoship_audit_policy": "audit_policy",
    "cargoship_pod_security": "pod_security",
    "cargoship_audit_log": "audit_log",
    "cargoship_chart_values": "chart_values",
}
# Run options with the type each must have.
OPTIONS = {
    "cargoship_profile": "profile",
    "cargoship_work_concurrency": "concurrency",
    "cargoship_api_kubeconfig": "str",
    "cargoship_api_context": "str",
    "cargoship_kubeconfig_update": "bool",
    "cargoship_kubeconfig_path": "str",
    "cargoship_cluster_name": "str",
    "cargoship_label_nodes": "bool",
    "cargoship_drain_timeout": "int",
    "cargoship_drain_force": "bool",
    "cargoship_pod_security_over_cis": "bool",
    "cargoship_ready_timeout": "int",
    "cargoship_service_timeout": "int",
    "cargoship_engine_settle": "int",
    "cargoship_lock_stale_after": "int",
    "cargoship_lock_touch_interval": "int",
    "cargoship_controllers_group": "str",
    "cargoship_workers_group": "str",
    "cargoship_run_id": "str",
    "cargoship_force": "bool",
    "cargoship_max_clock_skew": "int",
    "cargoship_hooks": "any",
    "cargoship_phase": "str",
    "cargoship_kubeconfig_keep": "bool",
    "cargoship_engine_version": "str",
}
KNOWN = set(DESIRED) | set(OPTIONS)
BOOLEAN_WORDS = {"true", "false", "yes", "no", "on", "off", "1", "0", "y", "n", "t", "f"}


def check_option(name: str, kind: str, value: object) -> None:
    # -e name=false gives the string "false": accept Ansible's boolean spellings, as its modules do.
    if kind == "bool" and not isinstance(value, bool) and str(value).lower() not in BOOLEAN_WORDS:
        raise InputError(f"{name}: expected true or false, got {value!r}")
    if kind == "int" and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
        raise InputError(f"{name}: expected a whole number of seconds, got {value!r}")
    if kind == "str" and not isinstance(value, str):
        raise InputError(f"{name}: expected a string, got {type(value).__name__}")
    if kind == "profile" and not (isinstance(value, str) and DNS_LABEL.match(value)):
        raise InputError(
            f"{name}: must be a lower-case DNS label (it becomes node-role.kubernetes.io/<profile>), got {value!r}"
        )
    if kind == "concurrency":
        text = str(value)
        if not CONCURRENCY.match(text):
            raise InputError(f"{name}: expected a count (e.g. 2) or a percentage (e.g. 25%), got {value!r}")


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("hosts",))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        hostvars = task_vars["hostvars"]
        for host in self._task.args["hosts"]:
            variables = hostvars[host]
            try:
                for name in variables:
                    if name.startswith("cargoship_") and name not in KNOWN:
                        hint = difflib.get_close_matches(name, sorted(KNOWN), n=1, cutoff=0.7)
                        raise InputError(f"{name}: unknown variable" + (f" (did you mean {hint[0]}?)" if hint else ""))
                state = {key: variables.get(name) for name, key in DESIRED.items()}
                validate(state)
                for name, kind in OPTIONS.items():
                    if variables.get(name) is not None:
                        check_option(name, kind, variables.get(name))
            except InputError as exc:
                return {**result, "failed": True, "msg": f"invalid input for host {host}: {exc}", "host": host}
            except AnsibleError as exc:
                return {**result, "failed": True, "msg": f"invalid input for host {host}: {exc.message}", "host": host}
        result.update(changed=False, checked=len(self._task.args["hosts"]))
        return result
