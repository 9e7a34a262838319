# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What each read-only phase reads on a host, as it declares it (``read`` in roles/<phase>/vars/main.yml).

One declaration serves two callers: the connect phase's survey, which asks every planned phase's read in
one round to each host (``host_survey`` without ``calls``), and the phase's own task
(``cargoship.engine.phase_read``), which takes the survey's answer on the control host or asks the host.
Both render the declaration with the same function and the host's variables, so the survey's call and
the phase's call are equal by construction: no phase is named in the connect phase, and no call can drift
from its twin.
"""

from __future__ import annotations

from ansible_collections.cargoship.engine.plugins.module_utils import _host_lock
from ansible_collections.cargoship.engine.plugins.plugin_utils._hooks import roles_of
from ansible_collections.cargoship.engine.plugins.plugin_utils._phases import load_phases, plan
from ansible_collections.cargoship.engine.plugins.plugin_utils._run_options import defaults, from_inventory

# When the survey asks a read: in every run (what no run changes: the OS, the network, the clock), or in a
# dry run only (what runs change is read again by a real run once it holds the lock).
SURVEY_WHEN = ("every run", "dry run")
# The modules host_survey can answer for (module_utils/_survey.py READERS; a unit test holds the two equal).
# Named here so that reading the declarations (every cargoship command does) imports none of Ansible's
# module code: importing _survey costs the command about 0.1 s.
SURVEY_MODULES = ("host_info", "host_lock", "engine_info", "engine_config")


def problems(phase: str, read: object) -> list[str]:
    """What is wrong with a phase's ``read`` declaration (checked when the declarations are loaded)."""
    if not isinstance(read, dict):
        return [f"{phase}: read must be a mapping with module, survey and args"]
    found = []
    if read.get("module") not in SURVEY_MODULES:
        found.append(f"{phase}: read.module must be one of {', '.join(SURVEY_MODULES)}, not {read.get('module')!r}")
    if read.get("survey") not in SURVEY_WHEN:
        found.append(f"{phase}: read.survey must be one of {', '.join(SURVEY_WHEN)}, not {read.get('survey')!r}")
    if not isinstance(read.get("args"), dict):
        found.append(f"{phase}: read.args must be a mapping")
    if "plan" in read and not isinstance(read["plan"], bool):
        found.append(f"{phase}: read.plan must be true or false")
    unknown = set(read) - {"module", "survey", "args", "become", "plan"}
    if unknown:
        found.append(f"{phase}: read has unknown keys {', '.join(sorted(unknown))}")
    return found


def declared(operation: str = "engine-config-sync", selected: str | None = None) -> list[dict]:
    """The planned phases that declare a read, in their order."""
    phases = load_phases(operation=operation)
    planned = plan(phases, selected or None)
    return [p for p in phases if p["name"] in planned and p.get("read")]


def trusted(value: object) -> object:
    """The declaration's texts as templates: they come from the collection's own files, not from a host."""
    from ansible.template import trust_as_template

    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, dict):
        return {key: trusted(item) for key, item in value.items()}
    if isinstance(value, list):
        return [trusted(item) for item in value]
    return value


def with_defaults(variables: dict) -> dict:
    """The host's variables with the table's default for each run option the host does not set, as the
    roles' own defaults give them (the survey renders every phase's read in the connect phase)."""
    layered = dict(variables)
    for name, value in defaults().items():
        if layered.get(name) is None:
            layered[name] = value
    return layered


def render(phase: dict, templar, variables: dict) -> dict:
    """The phase's read for one host: ``{"phase", "module", "args"}``, its arguments rendered with the host's
    variables as ``with_defaults`` gives them (an argument that renders to ``omit`` is left out)."""
    read = phase["read"]
    declared = from_inventory(read["args"]) if read["module"] == "engine_config" else read["args"]
    args = templar.copy_with_new_env(available_variables=variables).template(trusted(declared))
    return {"phase": phase["name"], "module": read["module"], "args": dict(args)}


def with_inventory(args: dict, templar, variables: dict) -> dict:
    """A task's engine_config arguments (already templated) with ``from_inventory`` spread: the desired state
    from the host's variables, each variable the host does not set left out, the task's own arguments
    winning (the engine_config action plugin)."""
    spread = from_inventory(args)
    templates = {key: value for key, value in spread.items() if key not in args}
    rendered = templar.copy_with_new_env(available_variables=variables).template(trusted(templates))
    return {**dict(rendered), **{key: value for key, value in spread.items() if key in args}}


def concerns(phase: dict, host: str, variables: dict) -> bool:
    """Whether the phase reads on this host: a phase of the controllers' (workers') play only on controllers
    (workers)."""
    role = "controller" if host in (variables.get("fleet_controllers") or []) else "worker"
    return role in roles_of(phase)


def asked(read: dict, check_mode: bool, applying_plan: bool) -> bool:
    """Whether the survey asks a read: in a dry run every read; in a real run the reads whose answers hold
    there, and, when it applies a reviewed plan, the reads the plan was made from (``plan: true``), so that
    every fingerprint is checked before anything is changed."""
    return check_mode or read["survey"] == "every run" or (applying_plan and bool(read.get("plan")))


def survey_calls(
    templar, variables: dict, check_mode: bool, selected: str | None = None, applying_plan: bool = False
) -> list[dict]:
    """The survey's calls for one host: every planned phase's read that concerns it that is asked (``asked``)."""
    host = variables.get("inventory_hostname", "")
    layered = with_defaults(variables)  # once for the host, not once per read
    return [
        render(phase, templar, layered)
        for phase in declared(selected=selected)
        if asked(phase["read"], check_mode, applying_plan) and concerns(phase, host, variables)
    ]


def lock_calls(templar, variables: dict, selected: str | None = None) -> list[dict]:
    """The reads a real run would make again on this host once it holds the lock, for the lock's own round
    (host_lock with ``read_planned``): the reads of what runs change (``survey: dry run``) of the planned
    phases of the lock's play that come after the lock, up to the first phase that changes hosts. A read
    that a user's hook could come before is left to its phase: a hook placed between the lock and it (after
    the lock, or around a phase in between, or before its own phase) may change what it reads."""
    hooks = variables.get("cargoship_hooks") or {}
    if not isinstance(hooks, dict):
        return []  # not yet a mapping (a template, say): where its hooks go is not known here
    phases = load_phases(operation="engine-config-sync")
    planned = set(plan(phases, selected or None))
    lock = next((p for p in phases if p["run_lock"] == "takes"), None)
    if lock is None or lock["name"] not in planned:
        return []
    # "<phase>.<before|after>" of each hook point in use (hook points are "<phase>.<moment>.<role>").
    hooked = {".".join(str(point).split(".")[:2]) for point in hooks}
    host = variables.get("inventory_hostname", "")
    layered = with_defaults(variables)
    calls = []
    between = [f"{lock['name']}.after"]
    for phase in phases:
        if phase["order"] <= lock["order"] or phase["play"] != lock["play"]:
            continue
        if phase["changes_hosts"]:
            break
        between.append(f"{phase['name']}.before")
        read = phase.get("read")
        if (
            phase["name"] in planned
            and read
            and read["survey"] == "dry run"
            and read["module"] in _host_lock.READ_UNDER_LOCK
            and concerns(phase, host, variables)
            and not hooked.intersection(between)
        ):
            calls.append(render(phase, templar, layered))
        between.append(f"{phase['name']}.after")
    return calls


def read_of(phase_name: str, templar, variables: dict) -> dict:
    """The phase's own call (the phase_read action), rendered as the survey renders it."""
    reading = [p for p in load_phases() if p.get("read")]
    phase = next((p for p in reading if p["name"] == phase_name), None)
    if phase is None:
        names = ", ".join(p["name"] for p in reading)
        raise ValueError(f"phase {phase_name!r} declares no read; the phases with one: {names}")
    return render(phase, templar, with_defaults(variables))
