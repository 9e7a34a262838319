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
    "mirrors": ("map", {"endpoint": ("list", "str"), "rewrite": ("map", "str")}),
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


def _check(value: object, spec: object, where: str) -> None:
    if spec == "any":
        return
    if spec in ("str", "secret"):
        if not isinstance(value, str):
            raise InputError(f"{where}: expected a string, got {type(value).__name__}")
        return
    if spec == "bool":
        if not isinstance(value, bool):
            raise InputError(f"{where}: expected true or false, got {type(value).__name__}")
        return
    kind, inner = spec  # type: ignore[misc]
    if kind == "list":
        if not isinstance(value, list):
            raise InputError(f"{where}: expected a list, got {type(value).__name__}")
        for index, item in enumerate(value):
            _check(item, inner, f"{where}[{index}]")
    elif kind in ("map", "map-or-empty"):
        if not isinstance(value, dict):
            raise InputError(f"{where}: expected a mapping, got {type(value).__name__}")
        for key, item in value.items():
            if not isinstance(key, str) or not key:
                raise InputError(f"{where}: keys must be non-empty strings")
            if item is None and kind == "map-or-empty":
                continue  # an entry without settings, which the engine accepts
            _check(item, ("dict", inner) if isinstance(inner, dict) else inner, _path(where, key))
    elif kind == "dict":
        if not isinstance(value, dict):
            raise InputError(f"{where}: expected a mapping, got {type(value).__name__}")
        for key, item in value.items():
            if key not in inner:
                hint = _closest(str(key), inner)
                raise InputError(
                    f"{_path(where, key)}: unknown key"
                    + (f" (did you mean '{hint}'?)" if hint else "")
                    + f"; allowed: {', '.join(sorted(inner))}"
                )
            _check(item, inner[key], _path(where, key))


def _closest(key: str, options: dict) -> str | None:
    import difflib

    found = difflib.get_close_matches(key, list(options), n=1, cutoff=0.6)
    return found[0] if found else None


def validate(state: dict) -> dict:
    """Check every input key; return the normalised state. Raises InputError naming the key path."""
    allowed = {
        "engine": "cargoship_engine",
        "registries": "cargoship_registries",
        "audit_policy": "cargoship_audit_policy",
        "pod_security": "cargoship_pod_security",
        "audit_log": "cargoship_audit_log",
        "chart_values": "cargoship_chart_values",
    }
    for key in state:
        if key not in allowed:
            raise InputError(f"unknown desired-state key {key}")
    engine = state.get("engine")
    if engine not in ENGINES:
        raise InputError(f"cargoship_engine: must be one of {', '.join(ENGINES)}, got {engine!r}")
    registries = state.get("registries")
    if registries is not None:
        _check(registries, ("dict", REGISTRY_SCHEMA), "cargoship_registries")
        for name, mirror in (registries.get("mirrors") or {}).items():
            for index, endpoint in enumerate(mirror.get("endpoint") or []):
                if not endpoint_ok(endpoint):
                    # An endpoint may carry user:password@ (the engine takes it): never echo that part.
                    shown = re.sub(r"^([a-z]+://)?[^/@]*@", r"\1…@", endpoint)
                    raise InputError(
                        f'cargoship_registries.mirrors["{name}"].endpoint[{index}]: not an endpoint '
                        f"(http(s)://host[:port][/path], or host[:port] for https): {shown!r}"
                    )
    for key in ("audit_policy", "pod_security"):
        document = state.get(key)
        if document is None:
            continue
        where = allowed[key]
        if not isinstance(document, dict):
            raise InputError(f"{where}: expected a mapping (the YAML document itself), got {type(document).__name__}")
        kind, api_prefix = (
            ("Policy", "audit.k8s.io/") if key == "audit_policy" else ("AdmissionConfiguration", "apiserver.")
        )
        if document.get("kind") != kind or not str(document.get("apiVersion", "")).startswith(api_prefix):
            raise InputError(
                f"{where}: must be a {kind} ({api_prefix}…), got kind={document.get('kind')!r} apiVersion={document.get('apiVersion')!r}"
            )
        if key == "audit_policy" and not isinstance(document.get("rules"), list):
            raise InputError(f"{where}.rules: expected a list of audit rules")
    retention = state.get("audit_log")
    if retention is not None:
        if not isinstance(retention, dict):
            raise InputError(
                f"cargoship_audit_log: expected a mapping of {', '.join(AUDIT_LOG_KEYS)}, got {type(retention).__name__}"
            )
        for key, value in retention.items():
            if key not in AUDIT_LOG_KEYS:
                hint = _closest(str(key), dict.fromkeys(AUDIT_LOG_KEYS))
                raise InputError(
                    f"cargoship_audit_log.{key}: unknown key"
                    + (f" (did you mean '{hint}'?)" if hint else "")
                    + f"; allowed: {', '.join(AUDIT_LOG_KEYS)}"
                )
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise InputError(f"cargoship_audit_log.{key}: expected a whole number (0 or more), got {value!r}")
    charts = state.get("chart_values")
    if charts is not None:
        if not isinstance(charts, dict):
            raise InputError(
                f"cargoship_chart_values: expected a mapping of chart name to settings, got {type(charts).__name__}"
            )
        seen: dict[str, str] = {}
        for name, settings in charts.items():
            where = _path("cargoship_chart_values", name)
            if not isinstance(name, str) or not DNS_LABEL.match(name) or len(name) > 63:
                # No dots: the engine names the AddOn of a manifest after its file name up to the first dot,
                # so two charts "a.x" and "a.y" would be one AddOn. Also keeps the file in its directory.
                raise InputError(
                    f"{where}: chart name must be a DNS label (lower case, digits and '-', no dots; the engine "
                    "names a manifest's AddOn after its file name up to the first dot)"
                )
            _check(settings, ("dict", CHART_SCHEMA), where)
            if "values" not in settings:
                raise InputError(f"{where}.values: required")
            namespace = settings.get("namespace", "kube-system")
            if not DNS_LABEL.match(namespace):
                raise InputError(f"{where}.namespace: not a valid namespace name: {namespace!r}")
            file_name = chart_file_name(name, namespace)
            if file_name in seen:
                raise InputError(
                    f"{where}: its manifest file {file_name} collides with chart {seen[file_name]!r} in the manifests directory"
                )
            seen[file_name] = name
    return {k: state.get(k) for k in allowed}


CHART_FILE_PREFIX = "cargoship-"


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


def render(state: dict, node_role: str, with_charts: bool, layout: dict | None = None) -> list[dict]:
    """The files a node should have: [{path, content, restart, kind}] in a stable order.

    ``restart``: the engine reads the file only at start, so a change needs an engine restart.
    Audit and pod-security files exist on servers only; chart values are written once per cluster.
    """
    engine = state["engine"]
    paths = engine_paths(engine, layout)
    files = []
    if state.get("registries") is not None:
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
            if state.get(kind) is None:
                continue
            files.append({"path": paths[kind], "content": render_document(state[kind]), "restart": True, "kind": kind})
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
        if dropin:
            files.append(
                {"path": paths["config_dropin"], "content": render_document(dropin), "restart": True, "kind": "config"}
            )
        if with_charts:
            for name, settings in sorted((state.get("chart_values") or {}).items()):
                namespace = settings.get("namespace", "kube-system")
                values = settings["values"]
                document = {
                    "apiVersion": "helm.cattle.io/v1",
                    "kind": "HelmChartConfig",
                    "metadata": {"name": name, "namespace": namespace, "labels": dict(MANAGED_BY)},
                    "spec": {"valuesContent": values if isinstance(values, str) else render_data(values)},
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
