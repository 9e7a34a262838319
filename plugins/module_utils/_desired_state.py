# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The desired engine configuration: validating it and rendering the files each node should have.

Shared by the input validation that runs on the controller before any host is contacted and by the
``engine_config`` module that compares and writes the files on each host, so both agree exactly.
"""

from __future__ import annotations

import os
import posixpath
import re

from ansible_collections.cargoship.engine.plugins.module_utils._credentials import parse
from ansible_collections.cargoship.engine.plugins.module_utils._engines import ENGINES
from ansible_collections.cargoship.engine.plugins.module_utils._yaml_emit import dump

# A work concurrency: a count (2) or a percentage of the workers (25%), as the command and the playbook take it.
CONCURRENCY = re.compile(r"^([1-9][0-9]*|([1-9][0-9]?|100)%)$")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

# What may appear under cargoship_registries: the engine's own registries.yaml schema (k3s and RKE2 read it
# with rancher/wharfie's types), no more. A key the engine does not know it ignores without a word, so
# here it is an error with a did-you-mean. A registry name may be "*" (every registry).
REGISTRY_SCHEMA = {
    # A mirror without settings (`registry.k8s.io:`) is the embedded registry's documented form: the entry
    # need only be present (docs.k3s.io, "Embedded Registry Mirror").
    "mirrors": ("map-or-empty", {"endpoint": ("list", "str"), "rewrite": ("map", "str")}),
    "configs": (
        "map-or-empty",
        {
            "auth": (
                "dict",
                {"username": "str", "password": "secret", "auth": "secret", "identity_token": "secret"},
            ),
            "tls": ("dict", {"ca_file": "str", "cert_file": "str", "key_file": "str", "insecure_skip_verify": "bool"}),
        },
    ),
}
HOST_PORT = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]*)(:[0-9]{1,5})?$|^\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?$")


def endpoint_ok(endpoint: str) -> bool:
    """A mirror endpoint: an http(s) URL, or host[:port][/path] without a scheme (which the engine reads
    as https)."""
    if any(c.isspace() for c in endpoint):
        return False
    scheme, sep, rest = endpoint.partition("://")
    if sep:
        return scheme in ("http", "https") and bool(rest.split("/", 1)[0])
    return bool(HOST_PORT.match(endpoint.split("/", 1)[0]))


CHART_SCHEMA = {"namespace": "str", "values": "any"}
# How each engine is told about the audit policy and the pod-security admission file: RKE2 has
# top-level config keys; k3s ignores those silently, so there they go through kube-apiserver-arg.
RKE2_KEYS = {"audit_policy": "audit-policy-file", "pod_security": "pod-security-admission-config-file"}
K3S_APISERVER_ARGS = {
    "audit_policy": ("audit-policy-file={audit_policy}", "audit-log-path={audit_log_path}"),
    "pod_security": ("admission-control-config-file={pod_security}",),
}
# Audit log retention (kube-apiserver's audit-log-max* flags). On k3s, which sets none, the values of the
# k3s hardening guide unless cargoship_audit_log says otherwise; RKE2 sets these itself (the same values),
# so there only what cargoship_audit_log sets is passed.
AUDIT_LOG_KEYS = ("maxage", "maxbackup", "maxsize")
K3S_AUDIT_LOG_DEFAULTS = {"maxage": 30, "maxbackup": 10, "maxsize": 100}


class InputError(ValueError):
    """Desired state that cannot be applied; the message names the key path."""


def engine_paths(engine: str, layout: dict | None = None) -> dict:
    """Where the engine's files are on a host. ``layout``: what the host's engine settings say
    (``config_file``, ``data_dir``, ``private_registry``, as engine_info reads them); defaults otherwise."""
    layout = layout or {}
    defaults = ENGINES[engine]
    config = layout.get("config_file") or defaults["config_file"]
    data = str(layout.get("data_dir") or defaults["data_dir"]).rstrip("/")
    registries = layout.get("private_registry") or defaults["private_registry"]
    for what, path in (("config file", config), ("data-dir", data), ("private-registry", registries)):
        if not isinstance(path, str) or not path.startswith("/") or ".." in path.split("/"):
            raise InputError(f"the engine's {what} {path!r} is not an absolute path: cargoship cannot place its files")
    return {
        "data_dir": data,
        "config_dropin": f"{config}.d/90-cargoship.yaml",
        "registries": registries,
        "audit_policy": f"{data}/server/cargoship-audit-policy.yaml",
        "audit_log_path": f"{data}/server/logs/audit.log",
        "pod_security": f"{data}/server/cargoship-pod-security.yaml",
        "manifests": f"{data}/server/manifests",
        # Where cargoship writes: directories of its own files (recursively), and the engine's registries file.
        "allowed_roots": (f"{config}.d", f"{data}/server"),
        "allowed_files": (registries,),
    }


def _path(parent: str, key: object) -> str:
    return f'{parent}["{key}"]' if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", str(key)) else f"{parent}.{key}"


# The value that asks for a kind of configuration to be removed: what cargoship wrote of it goes.
# A kind the inventory does not name at all is left as the hosts have it (removal is never inferred).
ABSENT = "absent"
KINDS_WITH_FILES = ("registries", "audit_policy", "pod_security", "chart_values")
VARIABLES = {
    "engine": "cargoship_engine",
    "registries": "cargoship_registries",
    "audit_policy": "cargoship_audit_policy",
    "pod_security": "cargoship_pod_security",
    "audit_log": "cargoship_audit_log",
    "chart_values": "cargoship_chart_values",
}
# What the API server accepts in an audit Policy (k8s.io/apiserver/pkg/apis/audit: Level, Stage) and in a
# PodSecurityConfiguration (k8s.io/pod-security-admission/api: levels and versions): anything else it
# refuses at start, which would be found only once a controller was drained and restarted.
AUDIT_LEVELS = ("None", "Metadata", "Request", "RequestResponse")
AUDIT_STAGES = ("RequestReceived", "ResponseStarted", "ResponseComplete", "Panic")
PSA_LEVELS = ("privileged", "baseline", "restricted")
PSA_VERSION = re.compile(r"^(latest|v1\.(0|[1-9][0-9]*))$")
PSA_MODES = ("enforce", "audit", "warn")
PSA_EXEMPTIONS = ("usernames", "runtimeClasses", "namespaces")


def kind_name(value: object) -> str:
    """A value's kind in the words of YAML, never a Python or Ansible class name."""
    if value is None:
        return "null (no value)"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    return "a value of another kind"


class Problems:
    """Every problem of an input, each with the value it is about (whose origin Ansible may know)."""

    def __init__(self) -> None:
        self.found: list[tuple[str, object]] = []

    def add(self, message: str, value: object = None) -> None:
        self.found.append((message, value))

    def raise_any(self) -> None:
        if self.found:
            raise InputError("; ".join(found[0] for found in self.found))


def _check(value: object, spec: object, where: str, problems: Problems) -> None:
    if spec == "any":
        return
    if spec in ("str", "secret"):
        if not isinstance(value, str):
            problems.add(f"{where}: expected a string, got {kind_name(value)}", value)
        return
    if spec == "bool":
        if not isinstance(value, bool):
            problems.add(f"{where}: expected true or false, got {kind_name(value)}", value)
        return
    kind, inner = spec  # type: ignore[misc]
    if kind == "list":
        if not isinstance(value, list):
            problems.add(f"{where}: expected a list, got {kind_name(value)}", value)
            return
        for index, item in enumerate(value):
            _check(item, inner, f"{where}[{index}]", problems)
    elif kind in ("map", "map-or-empty"):
        if not isinstance(value, dict):
            problems.add(f"{where}: expected a mapping, got {kind_name(value)}", value)
            return
        for key, item in value.items():
            if not isinstance(key, str) or not key:
                problems.add(f"{where}: keys must be non-empty strings, got {key!r}", value)
                continue
            if item is None and kind == "map-or-empty":
                continue  # an entry without settings, which the engine accepts
            _check(item, ("dict", inner) if isinstance(inner, dict) else inner, _path(where, key), problems)
    elif kind == "dict":
        if not isinstance(value, dict):
            problems.add(f"{where}: expected a mapping, got {kind_name(value)}", value)
            return
        for key, item in value.items():
            if key not in inner:
                _unknown_key(_path(where, key), key, sorted(inner), problems, item, show_allowed=True)
                continue
            _check(item, inner[key], _path(where, key), problems)


def _closest(key: str, options) -> str | None:
    import difflib

    found = difflib.get_close_matches(key, list(options), n=1, cutoff=0.6)
    return found[0] if found else None


def _unknown_key(where: str, key: object, allowed, problems: Problems, value: object, show_allowed=False) -> None:
    hint = _closest(str(key), allowed)
    problems.add(
        f"{where}: unknown key"
        + (f" (did you mean '{hint}'?)" if hint else "")
        + (f"; allowed: {', '.join(allowed)}" if show_allowed else ""),
        value,
    )


def _one_of(value: object, allowed: tuple, where: str, problems: Problems) -> None:
    if value not in allowed:
        hint = _closest(str(value), allowed)
        problems.add(
            f"{where}: {value!r} is not one of {', '.join(allowed)}" + (f" (did you mean {hint}?)" if hint else ""),
            value,
        )


def _check_audit_policy(document: dict, where: str, problems: Problems) -> None:
    rules = document.get("rules")
    if not isinstance(rules, list):
        problems.add(f"{where}.rules: expected a list of audit rules, got {kind_name(rules)}", rules)
        rules = []
    for stage_index, stage in enumerate(document.get("omitStages") or []):
        _one_of(stage, AUDIT_STAGES, f"{where}.omitStages[{stage_index}]", problems)
    for index, rule in enumerate(rules):
        here = f"{where}.rules[{index}]"
        if not isinstance(rule, dict):
            problems.add(f"{here}: expected a mapping (an audit rule), got {kind_name(rule)}", rule)
            continue
        if "level" not in rule:
            problems.add(f"{here}.level: required (one of {', '.join(AUDIT_LEVELS)})", rule)
        else:
            _one_of(rule["level"], AUDIT_LEVELS, f"{here}.level", problems)
        stages = rule.get("omitStages") or []
        if not isinstance(stages, list):
            problems.add(f"{here}.omitStages: expected a list, got {kind_name(stages)}", stages)
            continue
        for stage_index, stage in enumerate(stages):
            _one_of(stage, AUDIT_STAGES, f"{here}.omitStages[{stage_index}]", problems)


def _check_pod_security(document: dict, where: str, problems: Problems) -> None:
    plugins = document.get("plugins")
    if not isinstance(plugins, list):
        problems.add(f"{where}.plugins: expected a list of admission plugins, got {kind_name(plugins)}", plugins)
        return
    for index, plugin in enumerate(plugins):
        here = f"{where}.plugins[{index}]"
        if not isinstance(plugin, dict):
            problems.add(f"{here}: expected a mapping (name, configuration), got {kind_name(plugin)}", plugin)
            continue
        configuration = plugin.get("configuration")
        if plugin.get("name") != "PodSecurity" or not isinstance(configuration, dict):
            continue  # another admission plugin's configuration: the API server checks it
        here = f"{here}.configuration"
        defaults = configuration.get("defaults") or {}
        if not isinstance(defaults, dict):
            problems.add(f"{here}.defaults: expected a mapping, got {kind_name(defaults)}", defaults)
            defaults = {}
        for key, value in defaults.items():
            mode, version = str(key).partition("-")[::2]
            if mode not in PSA_MODES or version not in ("", "version"):
                allowed = [f"{m}{s}" for m in PSA_MODES for s in ("", "-version")]
                _unknown_key(f"{here}.defaults.{key}", key, allowed, problems, value)
            elif version:
                if not (isinstance(value, str) and PSA_VERSION.match(value)):
                    problems.add(f"{here}.defaults.{key}: expected latest or v1.<minor>, got {value!r}", value)
            else:
                _one_of(value, PSA_LEVELS, f"{here}.defaults.{key}", problems)
        exemptions = configuration.get("exemptions") or {}
        if not isinstance(exemptions, dict):
            problems.add(f"{here}.exemptions: expected a mapping, got {kind_name(exemptions)}", exemptions)
            continue
        for key, value in exemptions.items():
            if key not in PSA_EXEMPTIONS:
                _unknown_key(f"{here}.exemptions.{key}", key, PSA_EXEMPTIONS, problems, value)
            else:
                _check(value, ("list", "str"), f"{here}.exemptions.{key}", problems)


def problems_of(state: dict) -> Problems:
    """Every problem of the desired state, each naming its key path."""
    problems = Problems()
    for key in state:
        if key not in VARIABLES:
            problems.add(f"unknown desired-state key {key}")
    engine = state.get("engine")
    if engine not in ENGINES:
        problems.add(f"cargoship_engine: must be one of {', '.join(ENGINES)}, got {engine!r}", engine)
    # A string other than absent: named here once, and not checked again as the mapping it is not.
    reported = set()
    for key in KINDS_WITH_FILES:
        value = state.get(key)
        if isinstance(value, str) and value != ABSENT:
            reported.add(key)
            problems.add(
                f"{VARIABLES[key]}: expected a mapping, or {ABSENT} to remove what cargoship wrote, got {value!r}",
                value,
            )
    registries = state.get("registries")
    if registries is not None and registries != ABSENT and "registries" not in reported:
        _check(registries, ("dict", REGISTRY_SCHEMA), "cargoship_registries", problems)
        mirrors = registries.get("mirrors") if isinstance(registries, dict) else None
        for name, mirror in (mirrors if isinstance(mirrors, dict) else {}).items():
            endpoints = mirror.get("endpoint") if isinstance(mirror, dict) else None
            for index, endpoint in enumerate(endpoints if isinstance(endpoints, list) else []):
                if isinstance(endpoint, str) and not endpoint_ok(endpoint):
                    # An endpoint may carry user:password@ (the engine takes it): never echo that part.
                    shown = re.sub(r"^([a-z]+://)?[^/@]*@", r"\1…@", endpoint)
                    problems.add(
                        f'cargoship_registries.mirrors["{name}"].endpoint[{index}]: not an endpoint '
                        f"(http(s)://host[:port][/path], or host[:port] for https): {shown!r}",
                        endpoint,
                    )
    for key in ("audit_policy", "pod_security"):
        document = state.get(key)
        if document is None or document == ABSENT or key in reported:
            continue
        where = VARIABLES[key]
        if not isinstance(document, dict):
            problems.add(
                f"{where}: expected a mapping (the YAML document itself), or {ABSENT}, got {kind_name(document)}",
                document,
            )
            continue
        kind, api_prefix = (
            ("Policy", "audit.k8s.io/") if key == "audit_policy" else ("AdmissionConfiguration", "apiserver.")
        )
        if document.get("kind") != kind or not str(document.get("apiVersion", "")).startswith(api_prefix):
            problems.add(
                f"{where}: must be a {kind} ({api_prefix}…), got kind={document.get('kind')!r} "
                f"apiVersion={document.get('apiVersion')!r}",
                document,
            )
        elif key == "audit_policy":
            _check_audit_policy(document, where, problems)
        else:
            _check_pod_security(document, where, problems)
    retention = state.get("audit_log")
    if retention is not None:
        if not isinstance(retention, dict):
            problems.add(
                f"cargoship_audit_log: expected a mapping of {', '.join(AUDIT_LOG_KEYS)}, got {kind_name(retention)}",
                retention,
            )
            retention = {}
        for key, value in retention.items():
            if key not in AUDIT_LOG_KEYS:
                _unknown_key(f"cargoship_audit_log.{key}", key, AUDIT_LOG_KEYS, problems, value, show_allowed=True)
            elif not isinstance(value, int) or isinstance(value, bool) or value < 0:
                problems.add(f"cargoship_audit_log.{key}: expected a whole number (0 or more), got {value!r}", value)
    charts = state.get("chart_values")
    if charts is not None and charts != ABSENT and "chart_values" not in reported:
        if not isinstance(charts, dict):
            problems.add(
                f"cargoship_chart_values: expected a mapping of chart name to settings, or {ABSENT}, "
                f"got {kind_name(charts)}",
                charts,
            )
            charts = {}
        seen: dict[str, str] = {}
        for name, settings in charts.items():
            where = _path("cargoship_chart_values", name)
            if not isinstance(name, str) or not DNS_LABEL.match(name) or len(name) > 63:
                # No dots: the engine names the AddOn of a manifest after its file name up to the first dot,
                # so two charts "a.x" and "a.y" would be one AddOn. Also keeps the file in its directory.
                problems.add(
                    f"{where}: chart name must be a DNS label (lower case, digits and '-', no dots; the engine "
                    "names a manifest's AddOn after its file name up to the first dot)",
                    settings,
                )
                continue
            if settings == ABSENT:
                continue  # this chart's values are removed
            if not isinstance(settings, dict):
                problems.add(
                    f"{where}: expected a mapping (namespace, values), or {ABSENT}, got {kind_name(settings)}",
                    settings,
                )
                continue
            _check(settings, ("dict", CHART_SCHEMA), where, problems)
            if "values" not in settings:
                problems.add(f"{where}.values: required", settings)
            else:
                values_problem = chart_values_problem(settings["values"])
                if values_problem:
                    problems.add(f"{where}.values: {values_problem}", settings)
            namespace = settings.get("namespace", "kube-system")
            if not isinstance(namespace, str) or not DNS_LABEL.match(namespace):
                problems.add(f"{where}.namespace: not a valid namespace name: {namespace!r}", namespace)
                continue
            file_name = chart_file_name(name, namespace)
            if file_name in seen:
                problems.add(
                    f"{where}: its manifest file {file_name} collides with chart {seen[file_name]!r} in the "
                    "manifests directory",
                    settings,
                )
            seen[file_name] = name
    return problems


def chart_values_problem(values: object) -> str | None:
    """What is wrong with a chart's values (a mapping, or the YAML text of one), without showing them:
    they may hold secrets."""
    if isinstance(values, dict):
        return None
    if not isinstance(values, str):
        return f"expected a mapping of the chart's values, or the YAML text of one, got {kind_name(values)}"
    try:
        data = parse(values)
    except ValueError as exc:
        return f"the text is not a mapping of values: {exc}"
    if data is not None and not isinstance(data, dict):
        return f"the text is not a mapping of values: it reads as {kind_name(data)}"
    return None


def validate(state: dict) -> dict:
    """Check every input key; return the normalised state. Raises InputError naming every problem's key path."""
    problems_of(state).raise_any()
    return {k: state.get(k) for k in VARIABLES}


def named(state: dict, kind: str) -> bool:
    """Whether the inventory names this kind of configuration (a value, or absent to remove it)."""
    return state.get(kind) is not None


def wanted_charts(state: dict) -> dict:
    """The charts whose values should be on the controllers (those given as absent are not)."""
    charts = state.get("chart_values")
    if not isinstance(charts, dict):
        return {}
    return {name: settings for name, settings in charts.items() if settings != ABSENT}


CHART_FILE_PREFIX = "cargoship-"


def values_content(values: object) -> str:
    """A chart's values as its HelmChartConfig's valuesContent: a text as given, data as YAML."""
    return values if isinstance(values, str) else render_data(values)


def chart_addon_name(name: str, namespace: str) -> str:
    """The AddOn the engine keeps for the chart's manifest file: the file name up to its first dot."""
    return CHART_FILE_PREFIX + (name if namespace == "kube-system" else f"{namespace}-{name}")


def chart_file_name(name: str, namespace: str) -> str:
    return f"{chart_addon_name(name, namespace)}.yaml"


HEADER = "Managed by cargoship (cargoship.engine): its next run replaces a change made here."
MANAGED_BY = {"app.kubernetes.io/managed-by": "cargoship"}


def render_document(document: object) -> str:
    """A file's content: block YAML in the order given, after a header naming the tool that manages it."""
    return dump(document, header=HEADER)


def render_data(document: object) -> str:
    """Data as YAML without the header (what a diff shows of either side)."""
    return dump(document)


def content_of(kind: str, text: str) -> object:
    """What a file says, whatever its formatting, for comparing it with what it should say: the data it
    holds (a chart's values text read as data too). Raises ValueError for text that is not YAML or JSON."""
    data = parse(text)
    if kind == "chart_values" and isinstance(data, dict) and isinstance(data.get("spec"), dict):
        values = data["spec"].get("valuesContent")
        if isinstance(values, str):
            try:
                values = parse(values)
            except ValueError:
                pass
        data = {**data, "spec": {**data["spec"], "valuesContent": values}}
    return data


def same_content(kind: str, current: str | None, desired: str) -> bool:
    if current is None:
        return False
    if current == desired:
        return True
    try:
        return content_of(kind, current) == content_of(kind, desired)
    except ValueError:
        return False  # unreadable as data (or no PyYAML on the host to read it): rewritten


def managed_files(engine: str, node_role: str, with_charts: bool, layout: dict | None = None) -> list[dict]:
    """Every file cargoship may have written on a node of this role ({path, kind, restart, marked}):
    the candidates for removal when the desired state no longer has them. ``marked``: the path is the
    engine's own (registries.yaml), so only a file with cargoship's header is cargoship's."""
    paths = engine_paths(engine, layout)
    files = [{"path": paths["registries"], "kind": "registries", "restart": True, "marked": True}]
    if node_role == "server":
        files += [
            {"path": paths["audit_policy"], "kind": "audit_policy", "restart": True},
            {"path": paths["pod_security"], "kind": "pod_security", "restart": True},
            {"path": paths["config_dropin"], "kind": "config", "restart": True},
        ]
        if with_charts:
            try:
                names = sorted(os.listdir(paths["manifests"]))
            except OSError:
                names = []
            files += [
                {"path": posixpath.join(paths["manifests"], name), "kind": "chart_values", "restart": False}
                for name in names
                if name.startswith(CHART_FILE_PREFIX) and name.endswith(".yaml")
            ]
    return files


def removable_kinds(state: dict) -> set[str]:
    """The kinds whose files cargoship wrote may be removed where the desired state no longer has them:
    those the inventory asks to remove (absent); chart files of charts no longer listed; the config
    drop-in when neither kind that feeds it is left unnamed with a part in it (render keeps those parts)."""
    kinds = {kind for kind in ("registries", "audit_policy", "pod_security") if state.get(kind) == ABSENT}
    if named(state, "chart_values"):
        kinds.add("chart_values")
    if named(state, "audit_policy") or named(state, "pod_security"):
        kinds.add("config")
    return kinds


def _dropin_part(kind: str, current: dict | None) -> tuple[dict, list[str]]:
    """What the config drop-in on the host passes now for one kind (its RKE2 key, its kube-apiserver
    arguments), to be carried over when the inventory does not name that kind."""
    if not isinstance(current, dict):
        return {}, []
    keys = {RKE2_KEYS[kind]: current[RKE2_KEYS[kind]]} if RKE2_KEYS[kind] in current else {}
    prefixes = ("audit-policy-file=", "audit-log-") if kind == "audit_policy" else ("admission-control-config-file=",)
    args = current.get("kube-apiserver-arg+")
    return keys, [a for a in (args if isinstance(args, list) else []) if isinstance(a, str) and a.startswith(prefixes)]


def render(
    state: dict, node_role: str, with_charts: bool, layout: dict | None = None, current_dropin: dict | None = None
) -> list[dict]:
    """The files a node should have: [{path, content, restart, kind}] in a stable order.

    ``restart``: the engine reads the file only at start, so a change needs an engine restart.
    Audit and pod-security files exist on servers only; chart values are written once per cluster.
    A kind the state does not name gets no file here (what the host has of it stays); its part of the
    config drop-in is taken over from ``current_dropin`` (the drop-in on the host, read as data).
    """
    engine = state["engine"]
    paths = engine_paths(engine, layout)
    files = []
    if isinstance(state.get("registries"), dict):
        files.append(
            {
                "path": paths["registries"],
                "content": render_document(state["registries"]),
                "restart": True,
                "kind": "registries",
            }
        )
    if node_role == "server":
        dropin: dict = {}
        apiserver_args = []
        for kind in ("audit_policy", "pod_security"):
            value = state.get(kind)
            if value is None:
                keys, args = _dropin_part(kind, current_dropin)
                dropin.update(keys)
                apiserver_args += args
                continue
            if value == ABSENT:
                continue
            files.append({"path": paths[kind], "content": render_document(value), "restart": True, "kind": kind})
            if engine == "rke2":
                dropin[RKE2_KEYS[kind]] = paths[kind]
            else:
                apiserver_args += [arg.format(**paths) for arg in K3S_APISERVER_ARGS[kind]]
            if kind == "audit_policy":
                retention = {**(K3S_AUDIT_LOG_DEFAULTS if engine == "k3s" else {}), **(state.get("audit_log") or {})}
                apiserver_args += [f"audit-log-{key}={retention[key]}" for key in AUDIT_LOG_KEYS if key in retention]
        if apiserver_args:
            # "+" appends to what config.yaml already passes to kube-apiserver instead of replacing it.
            dropin["kube-apiserver-arg+"] = apiserver_args
        if dropin and "config" in removable_kinds(state):
            files.append(
                {"path": paths["config_dropin"], "content": render_document(dropin), "restart": True, "kind": "config"}
            )
        if with_charts:
            for name, settings in sorted(wanted_charts(state).items()):
                namespace = settings.get("namespace", "kube-system")
                document = {
                    "apiVersion": "helm.cattle.io/v1",
                    "kind": "HelmChartConfig",
                    "metadata": {"name": name, "namespace": namespace, "labels": dict(MANAGED_BY)},
                    "spec": {"valuesContent": values_content(settings["values"])},
                }
                path = posixpath.join(paths["manifests"], chart_file_name(name, namespace))
                files.append(
                    {"path": path, "content": render_document(document), "restart": False, "kind": "chart_values"}
                )
    for item in files:
        inside = any(item["path"].startswith(root + "/") for root in paths["allowed_roots"])
        if not (inside or item["path"] in paths["allowed_files"]) or ".." in item["path"].split("/"):
            raise InputError(f"refusing to write {item['path']}: outside the engine's directories")
    return files
