# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import difflib
import os

from ansible import constants as C
from ansible.errors import AnsibleError
from ansible.plugins.action import ActionBase

from ansible_collections.cargoship.engine.plugins.module_utils._desired_state import (
    ABSENT,
    CONCURRENCY,
    DNS_LABEL,
    KINDS_WITH_FILES,
    VARIABLES,
    kind_name,
    problems_of,
)
from ansible_collections.cargoship.engine.plugins.module_utils._host_lock import window_problem
from ansible_collections.cargoship.engine.plugins.module_utils._kube_access import (
    ARGUMENT_SPEC,
    LibraryMissing,
    api_client,
    describe,
    kubeconfig_files,
)
from ansible_collections.cargoship.engine.plugins.plugin_utils import _hooks, _plan
from ansible_collections.cargoship.engine.plugins.plugin_utils._phases import load_phases
from ansible_collections.cargoship.engine.plugins.plugin_utils._report import hosts_text
from ansible_collections.cargoship.engine.plugins.plugin_utils._run_options import OPTIONS as RUN_OPTIONS
from ansible_collections.cargoship.engine.plugins.plugin_utils._run_options import value as run_option

try:  # Where Ansible read a value (file:line:column); ansible-core 2.19 tags what it loads with it.
    from ansible._internal._datatag._tags import Origin
except ImportError:  # pragma: no cover - an ansible-core without data tags: messages go without the file
    Origin = None

DESIRED = {name: key for key, name in VARIABLES.items()}
# Run options with the kind each must be (the desired state's own variables are checked by problems_of).
OPTIONS = {option.name: option.kind for option in RUN_OPTIONS if option.kind not in ("desired", "engine")}
KNOWN = set(DESIRED) | set(OPTIONS)
# Variables of other names that are near misses of ours: a known name without its prefix (a refactor
# that dropped it), or one a letter or two away from a known name (a typo). Both would be silently
# ignored, and an ignored desired state means its files stay as they are on every host.
BARE_NAMES = {name.removeprefix("cargoship_"): name for name in DESIRED if name != "cargoship_engine"}
NEAR_MISS = 0.88
BOOLEAN_WORDS = {"true", "false", "yes", "no", "on", "off", "1", "0", "y", "n", "t", "f"}


def whole_number(value: object) -> int | None:
    """A whole number of seconds, 0 or more, as the inventory gives it or as -e name=10 does (text, which
    Ansible turns into a number for the module it reaches), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, str) and value.strip().isdigit() and value.strip().isascii():
        return int(value.strip())
    return None


def option_problem(name: str, kind: str, value: object, phases: list[dict]) -> list[str]:
    # -e name=false gives the string "false": accept Ansible's boolean spellings, as its modules do.
    if kind == "bool" and not isinstance(value, bool) and str(value).lower() not in BOOLEAN_WORDS:
        return [f"{name}: expected true or false, got {value!r}"]
    if kind in ("int", "timeout") and whole_number(value) is None:
        return [f"{name}: expected a whole number of seconds, got {value!r}"]
    # 0 is not "no limit" here (as kubectl drain --timeout=0 is): every node with work would give up at once.
    if kind == "timeout" and whole_number(value) == 0:
        return [f"{name}: expected 1 s or more, got 0: a wait of 0 s gives up at once (it is not 'no limit')"]
    if kind in ("str", "path") and not isinstance(value, str):
        return [f"{name}: expected a string, got {kind_name(value)}"]
    if kind == "profile" and not (isinstance(value, str) and DNS_LABEL.match(value)):
        return [f"{name}: must be a lower-case DNS label (it becomes node-role.kubernetes.io/<profile>), got {value!r}"]
    if kind == "concurrency" and not CONCURRENCY.match(str(value)):
        return [f"{name}: expected a count (e.g. 2) or a percentage (e.g. 25%), got {value!r}"]
    if kind == "restart" and value not in ("drain", "in_place"):
        return [f"{name}: expected drain or in_place, got {value!r}"]
    if kind == "hooks":
        return _hooks.problems(value, phases, check_files=True)
    if kind == "secret_paths":
        return secret_paths_problems(name, value)
    if kind == "phase" and value and value not in {p["name"] for p in phases}:
        hint = difflib.get_close_matches(str(value), [p["name"] for p in phases], n=1, cutoff=0.6)
        return [f"{name}: unknown phase {value!r}" + (f" (did you mean {hint[0]}?)" if hint else "")]
    return []


def secret_paths_problems(name: str, value: object) -> list[str]:
    """cargoship_secret_paths: a list of paths into cargoship_chart_values, each the chart's name (or *)
    and the keys below its values, as a text with dots (traefik.dashboard.note) or a list of keys (for a
    key with a dot in it: [traefik, tls.key])."""
    if not isinstance(value, list):
        return [f"{name}: expected a list of paths (chart.key.key, or a list of keys), got {kind_name(value)}"]
    found = []
    for index, entry in enumerate(value):
        keys = entry.split(".") if isinstance(entry, str) else entry
        if not isinstance(keys, list) or not all(isinstance(key, (str, int)) and str(key) for key in keys):
            found.append(f"{name}[{index}]: expected a text like chart.key.key or a list of keys, got {entry!r}")
        elif len(keys) < 2:
            found.append(f"{name}[{index}]: {entry!r} names a chart but no key inside its values (chart.key)")
    return found


def name_problem(name: str) -> str | None:
    """An inventory variable that looks meant for cargoship but is not one of its names."""
    if name in KNOWN:
        return None
    if name.startswith("cargoship_"):
        hint = difflib.get_close_matches(name, sorted(KNOWN), n=1, cutoff=0.7)
        return f"{name}: unknown variable" + (f" (did you mean {hint[0]}?)" if hint else "")
    if name in BARE_NAMES:
        return f"{name}: not a cargoship variable, and cargoship ignores it (did you mean {BARE_NAMES[name]}?)"
    hint = difflib.get_close_matches(name, sorted(KNOWN), n=1, cutoff=NEAR_MISS)
    if hint:
        return f"{name}: unknown variable (did you mean {hint[0]}?)"
    return None


# The file the cargoship command hands its -e KEY=VALUE in: short-lived and its own, so not named to the user.
COMMAND_LINE_VARS = "CARGOSHIP_EXTRA_VARS_FILE"


def origin_of(value: object) -> str | None:
    tag = Origin.get_tag(value) if Origin is not None else None
    if tag is None or not getattr(tag, "path", None):
        return None
    if tag.path == os.environ.get(COMMAND_LINE_VARS):
        return "the command line's -e"
    return str(tag)


def origin_of_variable(variables, name: str) -> str | None:
    try:
        return origin_of(variables.get(name))
    except AnsibleError:
        return None  # its value cannot be templated: the name alone is the problem


def host_problems(variables, phases: list[dict]) -> list[tuple[str, str | None]]:
    """Every problem of one host's variables, each with where Ansible read the value, if it knows. A variable
    whose template fails is named with Ansible's reason, and the others are checked all the same."""
    found: list[tuple[str, str | None]] = []
    unreadable: list[str] = []

    def read(name: str) -> object:
        try:
            return variables.get(name)
        except AnsibleError as exc:
            found.append((f"{name}: its value cannot be read: {exc.message}", None))
            unreadable.append(name)
            return None

    for name in variables:
        problem = name_problem(str(name))
        if problem:
            found.append((problem, origin_of_variable(variables, name)))
    state = {}
    for name, key in DESIRED.items():
        value = read(name)
        if name in unreadable:
            continue
        if key in KINDS_WITH_FILES and name in variables and value is None:
            found.append(
                (
                    f"{name}: empty (null); give its value, or {ABSENT} to remove what cargoship wrote of it "
                    "(a kind the inventory does not name at all is left as the hosts have it)",
                    None,
                )
            )
        state[key] = value
    found += [
        (message, origin_of(value))
        for message, value in problems_of(state).found
        if not message.startswith(tuple(f"{name}:" for name in unreadable))
    ]
    for name, kind in OPTIONS.items():
        value = read(name)
        if value is not None:
            found += [(message, origin_of(value)) for message in option_problem(name, kind, value, phases)]
    if not {"cargoship_lock_stale_after", "cargoship_lock_touch_interval"} & set(unreadable):
        found += lock_window_problems(variables)
    return found


def lock_window_problems(variables) -> list[tuple[str, str | None]]:
    """The lock's stale window against its touch interval (each of them a whole number, or checked above)."""
    stale = whole_number(run_option(variables, "cargoship_lock_stale_after"))
    interval = whole_number(run_option(variables, "cargoship_lock_touch_interval"))
    if stale is None or interval is None:
        return []  # named above
    problem = window_problem(stale, interval)
    if problem is None:
        return []
    where = "cargoship_lock_stale_after" if interval >= 1 else "cargoship_lock_touch_interval"
    return [
        (
            f"{where}: {problem} (cargoship_lock_stale_after: {stale}, cargoship_lock_touch_interval: {interval})",
            origin_of(variables.get(where)),
        )
    ]


PLAN_VARIABLES = ("cargoship_plan_out", "cargoship_plan_file", "cargoship_plan_digest", "cargoship_phase")


def plan_problems(variables, check_mode: bool) -> list[tuple[str, str | None]]:
    """A reviewed plan's variables against the run: a plan is written by a whole dry run and applied by a whole
    run, and the plan file named must be readable, unedited, and the reviewed one."""
    plan_out, plan_file = variables.get("cargoship_plan_out"), variables.get("cargoship_plan_file")
    digest = variables.get("cargoship_plan_digest")
    found = []
    if plan_out is not None and plan_file is not None:
        found.append(
            "cargoship_plan_out and cargoship_plan_file: a dry run writes a plan, a later run applies it; not both"
        )
    elif plan_out is not None and not check_mode:
        found.append("cargoship_plan_out: the plan is written by a dry run; run with --check (cargoship: --dry-run)")
    if digest is not None and plan_file is None:
        found.append(
            "cargoship_plan_digest: it names the digest of the plan given by cargoship_plan_file, which is not set"
        )
    if (plan_out is not None or plan_file is not None) and variables.get("cargoship_phase"):
        found.append("cargoship_phase: a plan covers a whole run; it cannot be written or applied with one phase alone")
    if isinstance(plan_out, str):
        # Written at the end of the dry run: a place it cannot go is known before the run.
        target = os.path.abspath(os.path.expanduser(plan_out))
        if os.path.isdir(target):
            found.append(f"cargoship_plan_out: {plan_out} is a directory; name the plan file to write")
        elif not os.path.isdir(os.path.dirname(target)):
            found.append(f"cargoship_plan_out: no such directory {os.path.dirname(target)} on the control host")
    if isinstance(plan_file, str) and (isinstance(digest, str) or digest is None):
        try:
            _plan.load(plan_file, digest)
        except _plan.PlanError as exc:
            found.append(f"cargoship_plan_file: {exc}")
    return [(message, None) for message in found]


def api_access_problem(kubeconfig: object, context: object) -> tuple[str, str] | None:
    """Why the API connection the run's control-host modules will make cannot be set up (the kubeconfig
    there, readable and with the context named), with the variable to blame; None if it can. All of it is
    local, known before any host is contacted. The options come as the modules take them: the inventory's,
    else kubernetes.core's environment variables."""
    if not isinstance(kubeconfig, (str, type(None))) or not isinstance(context, (str, type(None))):
        return None  # named by the option checks
    params = {
        key: os.environ.get(spec["fallback"][1][0]) if "fallback" in spec else spec.get("default")
        for key, spec in ARGUMENT_SPEC.items()
    }
    params["validate_certs"] = None  # a connection setting, not read to set one up
    if kubeconfig:
        params["kubeconfig"] = os.path.expanduser(kubeconfig)
    if context:
        params["context"] = context
    try:
        api_client(params)
    except LibraryMissing:
        return None  # the module says so, with how to install it
    except Exception as exc:  # the kubeconfig loader's kinds: a missing file, bad YAML, an unknown context
        # With the files there, what is left to blame is the context named.
        files_there = all(os.path.isfile(path) for path in kubeconfig_files(params))
        name = "cargoship_api_context" if context and files_there else "cargoship_api_kubeconfig"
        return name, f"the Kubernetes API cannot be reached with {describe(params)}: {exc}"
    return None


# The connections the run's lock keeper can use (plugins/action/lock_heartbeat.py): it touches each host's lock
# for as long as the run lives, with the ssh command Ansible's own ssh connection builds, or on the node itself.
SSH_CONNECTIONS = ("ssh", "ansible.builtin.ssh", "smart")
LOCAL_CONNECTIONS = ("local", "ansible.builtin.local")
PASSWORD_VARIABLES = ("ansible_password", "ansible_ssh_pass", "ansible_ssh_password")


def password_set(variables, name: str) -> bool:
    """Whether a password variable holds one (Ansible ignores an empty one); one that cannot be read, a vaulted
    value without its password say, is one all the same."""
    try:
        return bool(variables.get(name))
    except AnsibleError:
        return True


def connection_problems(variables, ask_pass: bool = False) -> list[tuple[str, str | None]]:
    """How a host is reached, if the run's lock keeper could not reach it in the same way: known on the control
    host; found otherwise only once every host is locked."""
    connection = variables.get("ansible_connection") or C.DEFAULT_TRANSPORT
    if connection in LOCAL_CONNECTIONS:
        return []
    if connection not in SSH_CONNECTIONS:
        return [
            (
                f"ansible_connection: {connection!r} is not a connection cargoship can use: the run keeps its lock "
                "on each host fresh over ssh (or local, on the node itself)",
                origin_of(connection),
            )
        ]
    given = next((name for name in PASSWORD_VARIABLES if name in variables and password_set(variables, name)), None)
    if given is None and not ask_pass:
        return []
    how = given or "the connection password (--ask-pass, --connection-password-file)"
    return [
        (
            f"{how}: SSH with a password is not supported: the run keeps its lock on each host fresh with ssh "
            "commands of its own, which cannot answer a password prompt; log in with an SSH key "
            "(ansible_ssh_private_key_file, or an ssh-agent)",
            origin_of_variable(variables, given) if given else None,
        )
    ]


def shown(hosts: list[str], every: int) -> str:
    text = hosts_text(hosts, every)
    return text if text == "every host" else f"host{'s' if len(hosts) > 1 else ''} {text}"


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("hosts",))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        hostvars = task_vars["hostvars"]
        hosts = list(self._task.args["hosts"])
        phases = load_phases()
        # The same problem (a group_vars file's) on many hosts is one error, with the hosts it concerns.
        problems: dict[tuple[str, str | None], list[str]] = {}
        for host in hosts:
            try:
                found = host_problems(hostvars[host], phases)
            except AnsibleError as exc:  # a variable that cannot be templated
                found = [(f"a variable cannot be read: {exc.message}", None)]
            try:
                found += connection_problems(hostvars[host], bool(self._play_context.password))
            except AnsibleError as exc:  # ansible_connection itself cannot be templated
                found.append((f"ansible_connection: its value cannot be read: {exc.message}", None))
            for problem in found:
                problems.setdefault(problem, []).append(host)
        # The API connection, once per kubeconfig and context the hosts name (one, in most inventories).
        access: dict[tuple, list[str]] = {}
        for host in hosts:
            try:
                chosen = (hostvars[host].get("cargoship_api_kubeconfig"), hostvars[host].get("cargoship_api_context"))
            except AnsibleError:
                continue  # named above
            access.setdefault(chosen, []).append(host)
        for (kubeconfig, context), on in access.items():
            problem = api_access_problem(kubeconfig, context)
            if problem:
                name, why = problem
                problems.setdefault((f"{name}: {why}", None), []).extend(on)
        # The plan's variables are the run's: read as the run's tasks read them (extra vars, and the vars of a
        # play that imports the playbook, which hostvars do not show).
        try:
            templar = self._templar.copy_with_new_env(available_variables=task_vars)
            run_vars = {name: templar.template(task_vars[name]) for name in PLAN_VARIABLES if name in task_vars}
            for problem in plan_problems(run_vars, bool(self._play_context.check_mode)):
                problems.setdefault(problem, []).extend(hosts)
        except AnsibleError as exc:
            problems.setdefault((f"a variable cannot be read: {exc.message}", None), []).extend(hosts)
        if problems:
            errors = [
                {"message": message, "hosts": on, **({"origin": origin} if origin else {})}
                for (message, origin), on in problems.items()
            ]
            lines = [
                f"  - {e['message']} ({shown(e['hosts'], len(hosts))}"
                + (f"; {e['origin']}" if "origin" in e else "")
                + ")"
                for e in errors
            ]
            count = f"{len(errors)} problem{'s' if len(errors) > 1 else ''}"
            return {
                **result,
                "failed": True,
                "msg": f"invalid input ({count}); no host was contacted and nothing was changed:\n" + "\n".join(lines),
                "input_errors": errors,
            }
        result.update(changed=False, checked=len(hosts))
        return result
