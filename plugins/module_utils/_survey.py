# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One round to a host that answers the read-only calls of several modules.

The host_survey module runs, for each call it is given, the same code as the module named (host_info,
host_lock, engine_info, engine_config), always in check mode, and returns every answer beside the
arguments it was given. On the control host, the action plugin of each of those modules gives back the
answer to a call with the same arguments instead of going to the host again (plugin_utils/_survey.py).
"""

from __future__ import annotations

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.cargoship.engine.plugins.module_utils import (
    _engine_config,
    _engine_info,
    _host_info,
    _host_lock,
)
from ansible_collections.cargoship.engine.plugins.module_utils._outcome import Failed

READERS = {
    "host_info": _host_info,
    "host_lock": _host_lock,
    "engine_info": _engine_info,
    "engine_config": _engine_config,
}


class Call:
    """What a module's logic uses of AnsibleModule, for one call inside the survey: always in check mode."""

    def __init__(self, survey, params: dict):
        self._survey = survey
        self.params = params
        self.check_mode = True
        self._diff = survey._diff
        self.no_log_values = survey.no_log_values
        self.warnings: list = []

    def run_command(self, *args, **kwargs):
        return self._survey.run_command(*args, **kwargs)

    def get_bin_path(self, *args, **kwargs):
        return self._survey.get_bin_path(*args, **kwargs)

    def atomic_move(self, *args, **kwargs):
        raise RuntimeError("the survey writes nothing")

    def warn(self, warning: str) -> None:
        self.warnings.append(warning)


def answer(survey, name: str, args: dict) -> dict:
    """The result module ``name`` gives for ``args`` in check mode, run on this host by ``survey``."""
    reader = READERS[name]
    rules = dict(reader.MODULE_KWARGS)
    rules.pop("supports_check_mode", None)
    spec = rules.pop("argument_spec")
    validated = ArgumentSpecValidator(spec, **rules).validate(args)
    survey.no_log_values.update(validated._no_log_values)
    if validated.error_messages:
        return {"failed": True, "msg": f"{name}: " + "; ".join(validated.error_messages)}
    call = Call(survey, validated.validated_parameters)
    try:
        result = dict(reader.run(call))
    except Failed as failure:
        result = failure.as_result()
    if call.warnings:
        result["warnings"] = call.warnings
    return result


def tagged(call: dict) -> dict:
    """The phase a call is the read of, where it says (the reads the phases declare)."""
    return {"phase": call["phase"]} if call.get("phase") else {}


def run_calls(survey, calls: list, credentials: list) -> list:
    """Every call answered in order. An engine_config call without a layout takes the engine's settings
    from the engine_info answer before it (as the phases pass engine_info's settings as the layout); with
    no engine_info call before it (a phase run alone without engine_facts), the engine's default layout, as
    the module has it."""
    answers = []
    settings = None
    asked_engine = False
    for index, call in enumerate(calls):
        name, args = call["module"], dict(call.get("args") or {})
        asked_engine = asked_engine or name == "engine_info"
        if name == "engine_config" and "layout" not in args and asked_engine:
            if settings is None:
                skipped = {"skipped": True, "msg": "no engine settings"}
                answers.append({**tagged(call), "module": name, "args": args, "result": skipped})
                continue
            args["layout"] = settings
        given = dict(args)
        if name == "engine_config":
            args["credentials"] = credentials[index] if index < len(credentials) else []
        result = answer(survey, name, args)
        if name == "engine_info" and not result.get("failed") and "settings" in result:
            settings = result["settings"]
        answers.append({**tagged(call), "module": name, "args": given, "result": result})
    return answers
