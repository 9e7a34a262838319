#!/usr/bin/python3
"""Test double of the k3s / RKE2 engine binary, installed on lab hosts as ``k3s`` or ``rke2``.

It reproduces the behaviour cargoship relies on, nothing more:

* ``--version`` prints the real two-line format;
* ``server`` / ``agent`` read ``config.yaml`` (+ ``config.yaml.d``) and ``registries.yaml`` at start,
  exit on a malformed config file, warn about and ignore unknown config keys as a server does, and
  exit on a server-only key given to a k3s agent (whose parser knows only agent flags: "flag provided
  but not defined"; k3s ``pkg/configfilearg/parser.go``, ``pkg/cli/cmds/agent.go``);
* a malformed ``registries.yaml`` does not end the process: it logs the error and retries every 5 s
  for ever, never signalling READY (k3s ``pkg/agent/config/config.go``, wharfie ``pkg/registries``);
* servers also load the audit policy and the pod-security admission file the config references,
  by each distribution's own keys (k3s: ``kube-apiserver-arg``; RKE2: top-level keys). A bad file
  ends a k3s server (kube-apiserver runs in its process); an RKE2 server keeps running while its
  kube-apiserver static pod crash-loops, and never signals READY (RKE2 ``pkg/executor/staticpod``);
* every successful start is recorded in ``/var/lib/rancher/<engine>/lab/loaded.json`` and appended
  to ``starts.log`` so tests can prove a restart picked up new config;
* the kubelet's part: at start it posts the node's status (Ready), then renews its Lease in
  ``kube-node-lease`` every 10 s; at stop it posts **nothing**, so the node stays Ready with its old
  heartbeat until the API double's grace period turns it Unknown (kubelet ``nodelease``,
  ``nodeStatusReportFrequency``; Kubernetes issue 127352);
* servers write the admin kubeconfig at the real path, forward port 6443 to the API double (so the
  API "on a controller" is down while its engine is), and apply manifests dropped into the server
  manifests directory without a restart, as the deploy controller does: polled every 15 s, one
  ``AddOn`` per file named after the file up to its first dot and holding its checksum, dotfiles,
  non-YAML files and files with a ``<file>.skip`` beside them ignored, and a removed file's objects
  left in place (real-engines.md, "server/manifests/");
* RKE2 nodes carry mirror pods for their static pods (kube-proxy; on servers etcd and the control
  plane), annotated ``kubernetes.io/config.mirror`` and recreated by the kubelet when deleted
  (real-engines.md, "RKE2 nodes").

Only the Python standard library and PyYAML (python3-yaml in the host image) are used.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time

LAB_DIR = "/etc/cargoship-lab"
DEFAULT_VERSIONS = {"k3s": "v1.30.2+k3s1", "rke2": "v1.30.2+rke2r1"}
GO_VERSION = {"k3s": "go version go1.22.4", "rke2": "go version go1.22.4 X:boringcrypto"}
VERSION_ARGS = ("--version", "-v", "version")
# CPU a Go binary of the real wrappers' kind spends answering --version (see below).
GO_VERSION_CPU_SECONDS = 0.025


def flavor_of(argv0: str) -> str:
    name = os.path.basename(argv0)
    return "rke2" if name.startswith("rke2") else "k3s"


def engine_version(flavor: str) -> str:
    try:
        with open(os.path.join(LAB_DIR, "engine-version"), encoding="utf-8") as handle:
            return handle.read().strip() or DEFAULT_VERSIONS[flavor]
    except FileNotFoundError:
        return DEFAULT_VERSIONS[flavor]


def print_version(flavor: str) -> None:
    build = hashlib.sha1(engine_version(flavor).encode()).hexdigest()[:8]
    print(f"{flavor} version {engine_version(flavor)} ({build})")
    print(GO_VERSION[flavor])


# The real binaries answer --version from their command-line parser before anything of a server is
# loaded: k3s's installed binary is a small wrapper (cmd/k3s/main.go) whose urfave/cli app prints the
# version before staging or running the server binary it carries; RKE2's cli app does the same. A Go
# program of that kind spends about 25 ms of CPU on it here (podman --version, a 33 MB Go binary:
# 24-27 ms, measured on this machine). The stand-in answers before importing what only a running
# server needs (urllib, ssl, yaml, threading: 40 ms of imports, which made it 2-3 x the real cost), and
# then spends CPU up to that figure, so that it is never quicker than the real binary either.
if __name__ == "__main__" and (len(sys.argv) < 2 or sys.argv[1] in VERSION_ARGS):
    print_version(flavor_of(sys.argv[0]))
    sys.stdout.flush()
    while time.process_time() < GO_VERSION_CPU_SECONDS:
        pass
    sys.exit(0)

# What a running server or agent needs.
import base64  # noqa: E402
import contextlib  # noqa: E402
import datetime  # noqa: E402
import glob  # noqa: E402
import json  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import ssl  # noqa: E402
import threading  # noqa: E402
import urllib.error  # noqa: E402
import urllib.parse  # noqa: E402
import urllib.request  # noqa: E402
import uuid  # noqa: E402

import yaml  # noqa: E402

# The kubelet renews its node Lease every 10 s (nodelease: renewInterval = 0.25 x 40 s).
LEASE_RENEW_SECONDS = 10
# The lab's record of the containers running on this host (sync_pod_containers).
CONTAINERS = "/run/cargoship-lab/containers.json"
LEASE_DURATION_SECONDS = 40
# A registries.yaml that cannot be read is retried on this period (the agent's own retry loop).
REGISTRIES_RETRY_SECONDS = 5
# The deploy controller looks at the manifests directory about every 15 s (real-engines.md, "server/manifests/").
MANIFEST_SCAN_SECONDS = 15
MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")

COMMON_KEYS = {
    "config",
    "debug",
    "v",
    "vmodule",
    "log",
    "alsologtostderr",
    "data-dir",
    "token",
    "token-file",
    "server",
    "node-name",
    "with-node-id",
    "node-label",
    "node-taint",
    "node-ip",
    "node-external-ip",
    "node-internal-dns",
    "node-external-dns",
    "kubelet-arg",
    "kube-proxy-arg",
    "private-registry",
    "container-runtime-endpoint",
    "default-runtime",
    "image-service-endpoint",
    "pause-image",
    "snapshotter",
    "resolv-conf",
    "protect-kernel-defaults",
    "selinux",
    "lb-server-port",
    "image-credential-provider-bin-dir",
    "image-credential-provider-config",
    "disable-default-registry-endpoint",
    "nonroot-devices",
    "airgap-extra-registry",
    "enable-pprof",
}
SERVER_KEYS = {
    "bind-address",
    "https-listen-port",
    "advertise-address",
    "advertise-port",
    "tls-san",
    "tls-san-security",
    "cluster-cidr",
    "service-cidr",
    "service-node-port-range",
    "cluster-dns",
    "cluster-domain",
    "egress-selector-mode",
    "write-kubeconfig",
    "write-kubeconfig-mode",
    "write-kubeconfig-group",
    "agent-token",
    "agent-token-file",
    "cluster-init",
    "cluster-reset",
    "cluster-reset-restore-path",
    "kube-apiserver-arg",
    "etcd-arg",
    "kube-controller-manager-arg",
    "kube-scheduler-arg",
    "kube-cloud-controller-manager-arg",
    "datastore-endpoint",
    "etcd-disable-snapshots",
    "etcd-expose-metrics",
    "etcd-snapshot-schedule-cron",
    "etcd-snapshot-retention",
    "etcd-snapshot-dir",
    "disable",
    "disable-scheduler",
    "disable-cloud-controller",
    "disable-kube-proxy",
    "disable-network-policy",
    "disable-helm-controller",
    "embedded-registry",
    "supervisor-metrics",
    "secrets-encryption",
    "system-default-registry",
}
FLAVOR_KEYS = {
    "k3s": {
        "server": {
            "flannel-backend",
            "flannel-ipv6-masq",
            "flannel-external-ip",
            "servicelb-namespace",
            "helm-job-image",
            "default-local-storage-path",
            "docker",
            "flannel-iface",
            "flannel-conf",
            "flannel-cni-conf-dir",
            "flannel-cni-conf",
            "vpn-auth",
            "vpn-auth-file",
            "rootless",
            "prefer-bundled-bin",
        },
        "agent": {
            "docker",
            "flannel-iface",
            "flannel-conf",
            "flannel-cni-conf-dir",
            "flannel-cni-conf",
            "vpn-auth",
            "vpn-auth-file",
            "rootless",
            "prefer-bundled-bin",
        },
    },
    "rke2": {
        "server": {
            "audit-policy-file",
            "pod-security-admission-config-file",
            "cni",
            "profile",
            "enable-servicelb",
            "kube-apiserver-image",
            "kube-controller-manager-image",
            "kube-scheduler-image",
            "etcd-image",
            "control-plane-resource-requests",
            "control-plane-resource-limits",
            "cloud-provider-name",
            "cloud-provider-config",
        },
        "agent": {"profile", "cloud-provider-name", "cloud-provider-config"},
    },
}
REGISTRIES_KEYS = {"mirrors", "configs"}
AUDIT_LEVELS = ("None", "Metadata", "Request", "RequestResponse")


class EngineError(Exception):
    """A condition the real engine treats as fatal: the process exits (and systemd restarts it)."""


class EngineStuck(EngineError):
    """A condition the real engine does not exit on: it keeps retrying and never signals READY."""


def log(level: str, msg: str) -> None:
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    sys.stderr.write(f'time="{now}" level={level} msg="{msg}"\n')
    sys.stderr.flush()


def lab_delay(name: str) -> float:
    """Seconds a test asks a start (``start-delay``) or a stop (``stop-delay``) to take, in LAB_DIR."""
    try:
        with open(os.path.join(LAB_DIR, name), encoding="utf-8") as handle:
            return float(handle.read().strip() or 0)
    except (FileNotFoundError, ValueError):
        return 0.0


def sha256_of(path: str) -> str:
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def load_yaml_file(path: str, what: str) -> object:
    try:
        with open(path, encoding="utf-8") as handle:
            return yaml.safe_load(handle)
    except yaml.YAMLError as exc:
        raise EngineError(f"failed to parse {what} {path}: {exc}".replace("\n", " ")) from exc
    except OSError as exc:
        raise EngineError(f"failed to read {what} {path}: {exc}") from exc


def config_path(flavor: str, args: list[str]) -> str:
    """The config file as the engine finds it: --config/-c, else <ENGINE>_CONFIG_FILE, else the default
    (real-engines.md, "paths can move")."""
    for index, arg in enumerate(args):
        if arg in ("--config", "-c") and index + 1 < len(args):
            return args[index + 1]
        if arg.startswith("--config="):
            return arg.split("=", 1)[1]
    return os.environ.get(f"{flavor.upper()}_CONFIG_FILE") or f"/etc/rancher/{flavor}/config.yaml"


def load_config(flavor: str, role: str, base: str = "") -> tuple[dict, dict[str, str]]:
    """Read the config file and its .d/ drop-ins like the engine: later files override earlier keys."""
    base = base or f"/etc/rancher/{flavor}/config.yaml"
    # Go's filepath.Glob, which the engine uses, matches hidden files too: so does this.
    # .yaml or .yml in any case (real-engines.md, "config.yaml.d/").
    dropins = glob.glob(f"{base}.d/*", include_hidden=True)
    paths = ([base] if os.path.exists(base) else []) + sorted(
        p for p in dropins if p.lower().endswith((".yaml", ".yml")) and os.path.isfile(p)
    )
    allowed = COMMON_KEYS | FLAVOR_KEYS[flavor][role] | (SERVER_KEYS if role == "server" else set())
    merged: dict = {}
    hashes: dict[str, str] = {}
    for path in paths:
        data = load_yaml_file(path, "config file")
        hashes[path] = sha256_of(path)
        if data is None:
            continue
        if not isinstance(data, dict):
            raise EngineError(f"failed to parse config file {path}: top level is not a mapping")
        for key, value in data.items():
            # "key+" appends to the list a previous file set instead of replacing it, as in k3s.
            name = key[:-1] if key.endswith("+") else key
            if flavor == "k3s" and role == "agent" and name in SERVER_KEYS | FLAVOR_KEYS["k3s"]["server"]:
                raise EngineError(f"flag provided but not defined: -{name}")
            if name not in allowed:
                log("warning", f"Unknown flag --{name} found in config.yaml, skipping")
                continue
            if key.endswith("+"):
                previous = merged.get(name, [])
                previous = [previous] if isinstance(previous, str) else list(previous)
                merged[name] = previous + ([value] if isinstance(value, str) else list(value))
            else:
                merged[name] = value
    return merged, hashes


def apiserver_args(config: dict) -> dict[str, str]:
    raw = config.get("kube-apiserver-arg", [])
    items = [raw] if isinstance(raw, str) else list(raw or [])
    args = {}
    for item in items:
        key, _sep, value = str(item).partition("=")
        args[key.lstrip("-")] = value
    return args


def referenced_server_files(flavor: str, config: dict) -> dict[str, str]:
    """The audit policy and pod-security admission files, by the keys each distribution reads."""
    if flavor == "rke2":
        found = {
            "audit-policy": config.get("audit-policy-file"),
            "pod-security": config.get("pod-security-admission-config-file"),
        }
    else:
        args = apiserver_args(config)
        found = {
            "audit-policy": args.get("audit-policy-file"),
            "pod-security": args.get("admission-control-config-file"),
        }
    return {kind: path for kind, path in found.items() if path}


def check_server_file(kind: str, path: str) -> None:
    data = load_yaml_file(path, f"{kind} file")
    expected = {"audit-policy": ("Policy", "audit.k8s.io/"), "pod-security": ("AdmissionConfiguration", "apiserver.")}
    kind_name, api_prefix = expected[kind]
    if (
        not isinstance(data, dict)
        or data.get("kind") != kind_name
        or not str(data.get("apiVersion", "")).startswith(api_prefix)
    ):
        raise EngineError(f"kube-apiserver exited: {kind} file {path} is not a valid {kind_name}")
    if kind == "audit-policy" and not isinstance(data.get("rules"), list):
        raise EngineError(f"kube-apiserver exited: audit policy {path} has no rules list")
    if kind == "audit-policy":
        for index, rule in enumerate(data["rules"]):
            level = rule.get("level") if isinstance(rule, dict) else None
            if level not in AUDIT_LEVELS:
                raise EngineError(
                    f"kube-apiserver exited: audit policy {path}: rules[{index}].level: Unsupported value: {level!r}"
                )
            # k8s.io/apiserver/pkg/apis/audit/validation (validateResources): a rule may name resources or
            # non-resource URLs, not both; kube-apiserver refuses such a policy at start.
            if isinstance(rule, dict) and rule.get("resources") and rule.get("nonResourceURLs"):
                raise EngineError(
                    f"kube-apiserver exited: audit policy {path}: rules[{index}].nonResourceURLs: Invalid value: "
                    "rules cannot apply to both regular resources and non-resource URLs"
                )


def load_registries(flavor: str, config: dict) -> tuple[dict, dict[str, str]]:
    path = config.get("private-registry") or f"/etc/rancher/{flavor}/registries.yaml"
    if not os.path.exists(path):
        return {}, {}
    try:
        data = load_yaml_file(path, "private registry configuration")
    except EngineError as exc:
        raise EngineStuck(str(exc)) from exc
    if data is None:
        return {}, {path: sha256_of(path)}
    if not isinstance(data, dict):
        raise EngineStuck(f"failed to parse private registry configuration {path}: top level is not a mapping")
    for key in data:
        if key not in REGISTRIES_KEYS:
            log("warning", f"Unknown key {key} in private registry configuration {path}, skipping")
    return data, {path: sha256_of(path)}


# Flags whose values the agent writes as ******** into the node-args annotation (k3s
# pkg/nodeconfig/nodeconfig.go, isSecret; real-engines.md, "What a running engine shows").
SECRET_FLAGS = {"token", "t", "agent-token", "datastore-endpoint", "etcd-s3-access-key", "etcd-s3-secret-key"}
# The header containerd's hosts.toml files carry when the engine generated them from registries.yaml at
# start; only directories with it are cleaned (k3s pkg/agent/containerd/config.go; real-engines.md).
HOSTS_TOML_HEADER = "# File generated by {flavor}. DO NOT EDIT. Use /etc/rancher/{flavor}/registries.yaml instead."
# A lab switch: the engine keeps what it loaded at its previous start, as an engine that ignores a file
# would (issue 29). A lab knob, not a behaviour of the real engines.
KEEP_PREVIOUS = "keep-previous-config"
# A lab switch: the server's helm-controller applies no chart values (issue 29's chart proof).
HELM_CONTROLLER_STALLED = "helm-controller-stalled"


def node_args(role: str, argv: list[str], config: dict) -> list[str]:
    """The node-args annotation as the agent writes it at start (k3s pkg/nodeconfig/nodeconfig.go): the
    subcommand, the command line's flags, then each config value as a flag (a list as the flag repeated),
    a secret's value as ********."""
    found = [role]
    pending_secret = False
    for arg in argv:
        if pending_secret:
            found.append("********")
            pending_secret = False
            continue
        name, sep, _value = arg.lstrip("-").partition("=")
        if name in SECRET_FLAGS:
            found.append(f"--{name}=********" if sep else arg)
            pending_secret = not sep
        else:
            found.append(arg)
    for key, value in config.items():
        for item in value if isinstance(value, list) else [value]:
            shown = "********" if key in SECRET_FLAGS else (str(item).lower() if isinstance(item, bool) else str(item))
            found += [f"--{key}", shown]
    return found


def node_config_hash(args: list[str], env: dict[str, str]) -> str:
    """node-config-hash: sha256 over the args and env annotations, base32 (k3s pkg/nodeconfig)."""
    digest = hashlib.sha256((json.dumps(args) + json.dumps(env, sort_keys=True)).encode()).digest()
    return base64.b32encode(digest).decode()


def hosts_toml(flavor: str, registry: str, mirror: dict) -> str:
    """containerd's hosts.toml for one registry, as the engine generates it from registries.yaml at start
    (k3s pkg/agent/containerd/config.go): the upstream as server, each endpoint as a host."""
    upstream = "https://registry-1.docker.io" if registry == "docker.io" else f"https://{registry}"
    lines = [HOSTS_TOML_HEADER.format(flavor=flavor), ""]
    if registry != "*":
        lines.append(f'server = "{upstream}/v2"')
        lines.append('capabilities = ["pull", "resolve"]')
    for endpoint in (mirror or {}).get("endpoint") or []:
        url = endpoint if "://" in endpoint else f"https://{endpoint}"
        host = url.rstrip("/") + ("" if url.rstrip("/").endswith("/v2") else "/v2")
        lines += ["", f'[host."{host}"]', '  capabilities = ["pull", "resolve"]', "  override_path = true"]
    return "\n".join(lines) + "\n"


def write_hosts_toml(flavor: str, data_dir: str, mirrors: dict) -> None:
    """The certs.d directory as the engine leaves it at start: a hosts.toml per mirrored registry (V(*)
    as _default), and the directories it generated before for registries no longer listed removed."""
    certs = os.path.join(data_dir, "agent", "etc", "containerd", "certs.d")
    os.makedirs(certs, exist_ok=True)
    wanted = {
        ("_default" if name == "*" else name): hosts_toml(flavor, name, mirror) for name, mirror in mirrors.items()
    }
    for name in os.listdir(certs):
        path = os.path.join(certs, name, "hosts.toml")
        if name not in wanted and os.path.isfile(path):
            with open(path, encoding="utf-8") as handle:
                generated = handle.readline().startswith("# File generated by")
            if generated:
                os.remove(path)
                with contextlib.suppress(OSError):
                    os.rmdir(os.path.join(certs, name))
    for name, text in wanted.items():
        os.makedirs(os.path.join(certs, name), exist_ok=True)
        with open(os.path.join(certs, name, "hosts.toml"), "w", encoding="utf-8") as handle:
            handle.write(text)


RKE2_APISERVER_FLAGS = {"audit-policy": "audit-policy-file", "pod-security": "admission-control-config-file"}


def apiserver_pod_args(server_files: dict[str, str]) -> list[str]:
    """RKE2's kube-apiserver arguments for the server files it loaded: audit-policy-file as is, its
    pod-security-admission-config-file as --admission-control-config-file (RKE2 pkg/podtemplate; real-engines.md)."""
    return [f"--{RKE2_APISERVER_FLAGS[kind]}={path}" for kind, path in sorted(server_files.items())]


def file_hash(args: list[str]) -> str:
    """FILE_HASH: sha256 over the contents of every file an --arg=/abs/path names, in order (RKE2
    pkg/podtemplate), read when the static pod is written, at start."""
    digest = hashlib.sha256()
    for arg in args:
        _name, _sep, value = arg.partition("=")
        if value.startswith("/") and os.path.isfile(value):
            with open(value, "rb") as handle:
                digest.update(handle.read())
    return digest.hexdigest()


def values_hash(chart: dict | None, config_values: str) -> str:
    """The configHash helm-controller puts on a chart's helm-install job (k3s-io/helm-controller
    pkg/controllers/chart/chart.go, hashObjects): sha256 over the values Secret's data (key, then the value
    in base64 as the unstructured object holds it; the HelmChart's valuesContent as values-01_HelmChart.yaml,
    its repoCA as ca-file.pem, the HelmChartConfig's as values-10_HelmChartConfig.yaml), then over the content
    ConfigMap's (<chart>.tgz.base64: chartContent), keys sorted, empty ones left out; SHA256=<HEX>."""
    spec = (chart or {}).get("spec") or {}
    name = (chart or {}).get("metadata", {}).get("name", "")
    secret_data = {
        key: base64.b64encode(value.encode()).decode()
        for key, value in (
            ("values-01_HelmChart.yaml", spec.get("valuesContent") or ""),
            ("ca-file.pem", spec.get("repoCA") or ""),
            ("values-10_HelmChartConfig.yaml", config_values or ""),
        )
        if value
    }
    content_data = {f"{name}.tgz.base64": spec["chartContent"]} if spec.get("chartContent") else {}
    digest = hashlib.sha256()
    for data in (secret_data, content_data):
        for key in sorted(data):
            digest.update(key.encode() + data[key].encode())
    return "SHA256=" + digest.hexdigest().upper()


# The chart each engine ships and deploys from its own manifests directory at every server start (k3s docs,
# "Managing Packaged Components": traefik.yaml; RKE2 docs, "Helm Integration": rke2-ingress-nginx).
PACKAGED_CHARTS = {"k3s": "traefik", "rke2": "rke2-ingress-nginx"}


def packaged_chart(flavor: str) -> dict:
    name = PACKAGED_CHARTS[flavor]
    return {
        "apiVersion": "helm.cattle.io/v1",
        "kind": "HelmChart",
        "metadata": {"name": name, "namespace": "kube-system"},
        "spec": {
            "chart": f"https://%{{KUBERNETES_API}}%/static/charts/{name}.tgz",
            "valuesContent": "deployment:\n  podAnnotations: {}\n",
        },
    }


class ApiClient:
    """Just enough of a Kubernetes client to play the kubelet's part (node registration, status)."""

    def __init__(self) -> None:
        with open(os.path.join(LAB_DIR, "api.json"), encoding="utf-8") as handle:
            conf = json.load(handle)
        self.url = conf["url"].rstrip("/")
        self.token = conf["token"]
        self.context = ssl.create_default_context(cafile=os.path.join(LAB_DIR, "ca.crt"))

    def call(self, method: str, path: str, body: object = None, content_type: str = "application/json") -> dict:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self.token}")
        request.add_header("Content-Type", content_type)
        with urllib.request.urlopen(request, context=self.context, timeout=10) as response:
            return json.loads(response.read() or b"{}")

    def exists(self, path: str) -> bool:
        try:
            self.call("GET", path)
            return True
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return False
            raise

    def apply(self, obj: dict) -> None:
        """Create or replace one manifest object, as the engine's deploy controller does."""
        api_version, kind = obj["apiVersion"], obj["kind"]
        plural = kind.lower() + "s"
        namespace = obj.get("metadata", {}).get("namespace", "kube-system" if kind.startswith("Helm") else "default")
        obj.setdefault("metadata", {})["namespace"] = namespace
        prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        collection = f"{prefix}/namespaces/{namespace}/{plural}"
        name = obj["metadata"]["name"]
        if self.exists(f"{collection}/{name}"):
            self.call("PUT", f"{collection}/{name}", obj)
        else:
            self.call("POST", collection, obj)


class Engine:
    def __init__(self, flavor: str, role: str, args: list[str] | None = None) -> None:
        self.flavor = flavor
        self.role = role
        self.argv = list(args or [])
        self.config_file = config_path(flavor, self.argv)
        self.data_dir = f"/var/lib/rancher/{flavor}"
        with open(os.path.join(LAB_DIR, "node.json"), encoding="utf-8") as handle:
            self.node = json.load(handle)
        self.version = engine_version(flavor)
        self.api = ApiClient()
        self.stopping = threading.Event()
        self.state_dir = f"/var/lib/rancher/{flavor}/lab"
        self.etcd_member = False
        self.loaded: dict = {}

    # -- start-up ---------------------------------------------------------------------------------
    def load(self) -> dict:
        config, files = load_config(self.flavor, self.role, self.config_file)
        self.data_dir = str(config.get("data-dir") or f"/var/lib/rancher/{self.flavor}")
        # The node name: node-name from the config, else the hostname lower-cased; never anything the
        # inventory calls the host (real-engines.md, "node name").
        self.node["name"] = str(config.get("node-name") or socket.gethostname().lower())
        # An etcd member: every RKE2 server; a k3s server that starts an etcd cluster or joins one, unless
        # it uses an external datastore (k3s docs, "High Availability Embedded etcd"; real-engines.md).
        self.etcd_member = (
            self.role == "server"
            and not config.get("datastore-endpoint")
            and (self.flavor == "rke2" or bool(config.get("cluster-init")) or bool(config.get("server")))
        )
        registries, reg_files = load_registries(self.flavor, config)
        files.update(reg_files)
        server_files = {}
        if self.role == "server":
            for kind, path in referenced_server_files(self.flavor, config).items():
                try:
                    check_server_file(kind, path)
                except EngineError as exc:
                    # k3s runs kube-apiserver in its own process, which exits; RKE2 runs it as a static
                    # pod that crash-loops while the rke2 server process waits for it, never READY.
                    raise (EngineStuck(str(exc)) if self.flavor == "rke2" else exc) from exc
                files[path] = sha256_of(path)
                server_files[kind] = path
        return {
            "flavor": self.flavor,
            "role": self.role,
            "version": self.version,
            "pid": os.getpid(),
            "started_at": time.time(),
            "files": files,
            "server_files": server_files,
            "registry_mirrors": sorted((registries.get("mirrors") or {}).keys()),
            "mirrors": registries.get("mirrors") or {},
            "node_args": node_args(self.role, self.argv, config),
            # RKE2's apiserver static pod, written at start with the files it names hashed in.
            "apiserver_args": apiserver_pod_args(server_files),
            "apiserver_file_hash": file_hash(apiserver_pod_args(server_files)),
            "registry_configs": sorted((registries.get("configs") or {}).keys()),
        }

    def previous_loaded(self) -> dict | None:
        try:
            with open(os.path.join(self.state_dir, "loaded.json"), encoding="utf-8") as handle:
                return json.load(handle)
        except (OSError, ValueError):
            return None

    def record(self, loaded: dict) -> None:
        os.makedirs(self.state_dir, exist_ok=True)
        tmp = os.path.join(self.state_dir, ".loaded.json.tmp")
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump(loaded, handle, indent=2, sort_keys=True)
        os.replace(tmp, os.path.join(self.state_dir, "loaded.json"))
        with open(os.path.join(self.state_dir, "starts.log"), "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"started_at": loaded["started_at"], "files": loaded["files"]}) + "\n")

    def write_apiserver_manifest(self, loaded: dict) -> None:
        """RKE2 writes the kube-apiserver static pod manifest at every server start, its FILE_HASH over the
        files its arguments name as they are then (RKE2 pkg/podtemplate, pkg/executor/staticpod;
        real-engines.md, "What a running engine shows"); the kubelet runs it and mirrors it in the API."""
        directory = os.path.join(self.data_dir, "agent", "pod-manifests")
        os.makedirs(directory, exist_ok=True)
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "kube-apiserver", "namespace": "kube-system"},
            "spec": {
                "containers": [
                    {
                        "name": "kube-apiserver",
                        "command": ["kube-apiserver"],
                        "args": list(loaded.get("apiserver_args") or []),
                        "env": [{"name": "FILE_HASH", "value": loaded.get("apiserver_file_hash", "")}],
                    }
                ]
            },
        }
        tmp = os.path.join(directory, ".kube-apiserver.yaml.tmp")
        with open(tmp, "w", encoding="utf-8") as handle:
            yaml.safe_dump(pod, handle)
        os.replace(tmp, os.path.join(directory, "kube-apiserver.yaml"))

    def write_admin_kubeconfig(self) -> None:
        target = f"/etc/rancher/{self.flavor}/{self.flavor}.yaml"
        with open(os.path.join(LAB_DIR, "admin-kubeconfig.yaml"), encoding="utf-8") as handle:
            content = handle.read()
        tmp = target + ".tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(content)
        os.replace(tmp, target)

    # -- the kubelet's part -------------------------------------------------------------------------
    def node_labels(self) -> dict[str, str]:
        labels = {
            "kubernetes.io/hostname": self.node["name"],
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": self.node.get("arch", "amd64"),
            "node.kubernetes.io/instance-type": self.flavor,
        }
        if self.role == "server":
            labels["node-role.kubernetes.io/control-plane"] = "true"
            labels["node-role.kubernetes.io/master"] = "true"
            if self.etcd_member:
                labels["node-role.kubernetes.io/etcd"] = "true"
        return labels

    def node_info(self) -> dict[str, str]:
        """The fields a real kubelet reports; clients validate that all are present."""

        def read(path: str) -> str:
            try:
                with open(path, encoding="utf-8") as handle:
                    return handle.read().strip()
            except OSError:
                return ""

        os_release = dict(line.split("=", 1) for line in read("/etc/os-release").splitlines() if "=" in line)
        return {
            "kubeletVersion": self.version,
            "kubeProxyVersion": self.version,
            "containerRuntimeVersion": "containerd://1.7.17-k3s1",
            "architecture": self.node.get("arch", "amd64"),
            "operatingSystem": "linux",
            "kernelVersion": os.uname().release,
            "osImage": os_release.get("PRETTY_NAME", "").strip('"'),
            "machineID": read("/etc/machine-id"),
            "systemUUID": read("/etc/machine-id"),
            "bootID": read("/proc/sys/kernel/random/boot_id"),
        }

    def set_ready(self, ready: bool, reason: str) -> None:
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        condition = {
            "type": "Ready",
            "status": "True" if ready else "False",
            "reason": reason,
            "message": "kubelet is posting ready status" if ready else "engine stopped",
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        }
        conditions = [condition]
        if self.etcd_member and ready:
            # What k3s's etcd controller sets on a server's node once its member has joined (k3s
            # pkg/etcd/etcd.go, the EtcdIsVoter condition; the API double can hold a member as a learner
            # after its next start: POST /lab/learner).
            conditions.append(
                {
                    "type": "EtcdIsVoter",
                    "status": "True",
                    "reason": "MemberNotLearner",
                    "message": "Node is a voting member of the etcd cluster",
                    "lastHeartbeatTime": now,
                    "lastTransitionTime": now,
                }
            )
        status = {
            "conditions": conditions,
            "addresses": [
                {"type": "InternalIP", "address": self.node["ip"]},
                {"type": "Hostname", "address": self.node["name"]},
            ],
            "nodeInfo": self.node_info(),
        }
        self.api.call(
            "PATCH", f"/api/v1/nodes/{self.node['name']}/status", {"status": status}, "application/merge-patch+json"
        )

    def annotations(self) -> dict[str, str]:
        """What the agent writes at start of the configuration it loaded (real-engines.md, "What a running
        engine shows")."""
        args = self.loaded.get("node_args") or [self.role]
        env: dict[str, str] = {}
        return {
            f"{self.flavor}.io/node-args": json.dumps(args),
            f"{self.flavor}.io/node-env": json.dumps(env),
            f"{self.flavor}.io/node-config-hash": node_config_hash(args, env),
        }

    def register(self) -> None:
        name = self.node["name"]
        if not self.api.exists(f"/api/v1/nodes/{name}"):
            self.api.call(
                "POST",
                "/api/v1/nodes",
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {"name": name, "labels": self.node_labels(), "annotations": self.annotations()},
                    "spec": {},
                },
            )
        else:
            self.api.call(
                "PATCH",
                f"/api/v1/nodes/{name}",
                {"metadata": {"labels": self.node_labels(), "annotations": self.annotations()}},
                "application/merge-patch+json",
            )
        self.set_ready(True, "KubeletReady")

    def register_until_done(self) -> None:
        """As the kubelet registers: an API server that errs or cannot be reached is tried again with
        backoff (kubernetes pkg/kubelet/kubelet_node_status.go, registerWithAPIServer, up to 7 s between
        attempts); here for at most a minute, then the start fails."""
        deadline, wait = time.monotonic() + 60, 0.1
        while True:
            try:
                self.register()
                return
            except urllib.error.HTTPError as exc:
                if exc.code < 429 or time.monotonic() > deadline:
                    raise
                log("error", f"Unable to register node with API server: {exc.code}; retrying")
            except (OSError, urllib.error.URLError) as exc:
                if time.monotonic() > deadline:
                    raise
                log("error", f"Unable to register node with API server: {exc}; retrying")
            time.sleep(wait)
            wait = min(7.0, wait * 2)

    def renew_lease(self) -> None:
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        name = self.node["name"]
        self.api.apply(
            {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": name, "namespace": "kube-node-lease"},
                "spec": {"holderIdentity": name, "leaseDurationSeconds": LEASE_DURATION_SECONDS, "renewTime": now},
            }
        )

    def post_status_if_lost(self) -> None:
        """A running kubelet reports its node's status again when the API shows another: the node lifecycle
        controller marks a node Unknown when its Lease went unrenewed (a network outage), and the kubelet's
        next status update, made every 10 s and whenever the API's status differs from its own, puts Ready back
        (kubernetes pkg/kubelet/kubelet_node_status.go, updateNodeStatus / tryUpdateNodeStatus)."""
        node = self.api.call("GET", f"/api/v1/nodes/{self.node['name']}")
        conditions = (node.get("status") or {}).get("conditions") or []
        if not any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
            log("info", "node status in the API is not Ready: posting it again")
            self.set_ready(True, "KubeletReady")

    def lease_loop(self) -> None:
        while True:
            try:
                self.renew_lease()
                self.post_status_if_lost()
            except (OSError, urllib.error.URLError) as exc:
                log("error", f"failed to renew node lease: {exc}")
            try:
                self.sync_mirror_pods()
            except (OSError, urllib.error.URLError, KeyError) as exc:
                log("error", f"failed to sync mirror pods: {exc}")
            try:
                self.sync_pod_containers()
            except (OSError, urllib.error.URLError, KeyError, ValueError) as exc:
                log("error", f"failed to sync pod status: {exc}")
            if self.stopping.wait(LEASE_RENEW_SECONDS):
                return

    # -- the server's part --------------------------------------------------------------------------
    def manifests_loop(self) -> None:
        directory = f"{self.data_dir}/server/manifests"
        # The packaged chart's manifest, written at every server start (see PACKAGED_CHARTS).
        os.makedirs(directory, exist_ok=True)
        packaged = os.path.join(directory, f"{PACKAGED_CHARTS[self.flavor]}.yaml")
        with open(packaged + ".tmp", "w", encoding="utf-8") as handle:
            yaml.safe_dump(packaged_chart(self.flavor), handle)
        os.replace(packaged + ".tmp", packaged)
        while not self.stopping.is_set():
            for path in manifest_files(directory):
                addon = os.path.basename(path).split(".", 1)[0]
                addon_path = f"/apis/k3s.cattle.io/v1/namespaces/kube-system/addons/{addon}"
                try:
                    digest = sha256_of(path)
                    if (
                        self.api.exists(addon_path)
                        and self.api.call("GET", addon_path).get("spec", {}).get("checksum") == digest
                    ):
                        continue
                    with open(path, encoding="utf-8") as handle:
                        docs = [doc for doc in yaml.safe_load_all(handle) if doc]
                    for doc in docs:
                        self.api.apply(doc)
                        if doc.get("kind") in ("HelmChart", "HelmChartConfig"):
                            self.helm_install_job(doc)
                    self.api.apply(
                        {
                            "apiVersion": "k3s.cattle.io/v1",
                            "kind": "Addon",
                            "metadata": {"name": addon, "namespace": "kube-system"},
                            "spec": {"source": path, "checksum": digest},
                        }
                    )
                    log("info", f"Applied manifest {path} as AddOn {addon}")
                except (yaml.YAMLError, KeyError, TypeError, OSError, urllib.error.URLError) as exc:
                    log("error", f"Failed to process manifest {path}: {exc}".replace("\n", " "))
            self.stopping.wait(MANIFEST_SCAN_SECONDS)

    def helm_install_job(self, changed: dict) -> None:
        """helm-controller's answer to a HelmChart or HelmChartConfig applied: a helm-install-<chart> job for
        the HelmChart of that name, its pod template carrying the hash of the chart's and the config's values
        (helm-controller pkg/controllers/chart; real-engines.md). A config with no chart of its name: none."""
        chart = changed["metadata"]["name"]
        namespace = changed["metadata"].get("namespace", "kube-system")
        where = f"/apis/helm.cattle.io/v1/namespaces/{namespace}"
        if os.path.exists(os.path.join(LAB_DIR, HELM_CONTROLLER_STALLED)):
            # A lab switch: helm-controller runs no job (stuck, or its leader elsewhere and down). A lab
            # knob, not a behaviour of the real engines.
            log("warning", f"helm-controller runs nothing ({LAB_DIR}/{HELM_CONTROLLER_STALLED})")
            return
        if not self.api.exists(f"{where}/helmcharts/{chart}"):
            return
        helm_chart = self.api.call("GET", f"{where}/helmcharts/{chart}")
        config_path = f"{where}/helmchartconfigs/{chart}"
        config = self.api.call("GET", config_path) if self.api.exists(config_path) else {}
        self.api.apply(
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {
                    "name": f"helm-install-{chart}",
                    "namespace": namespace,
                    "labels": {"helmcharts.helm.cattle.io/chart": chart},
                },
                "spec": {
                    "template": {
                        "metadata": {
                            "annotations": {
                                "helmcharts.helm.cattle.io/configHash": values_hash(
                                    helm_chart, str((config.get("spec") or {}).get("valuesContent") or "")
                                )
                            }
                        },
                        "spec": {
                            "containers": [{"name": "helm", "image": "rancher/klipper-helm"}],
                            "restartPolicy": "OnFailure",
                        },
                    }
                },
                "status": {"succeeded": 1},
            }
        )

    # -- static pods (RKE2) --------------------------------------------------------------------------
    def static_pods(self) -> list[str]:
        if self.flavor != "rke2":
            return []  # k3s runs its control plane and kube-proxy inside its own process
        components = ["kube-proxy"]
        if self.role == "server":
            components += ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"]
        return components

    def sync_pod_containers(self) -> None:
        """The pods' containers outlive the engine: k3s's and RKE2's units use KillMode=process, so stopping the
        engine stops its own process and containerd-shim keeps the containers running; only the killall script
        (or a reboot) stops them (real-engines.md, "KillMode=process"; k3s docs, uninstall/killall). The lab
        keeps its record of the running containers in CONTAINERS (under /run, so a reboot clears it, and the
        killall stand-in removes it). At each pass the kubelet stand-in reports, for each pod bound to its node,
        the container it runs: the one recorded if it is still there (an engine restart keeps it: same
        containerID, startedAt and restartCount), else a new one (restartCount + 1 if the pod ran one before).
        Mirror pods are the static pods' own (sync_mirror_pods)."""
        name = self.node["name"]
        try:
            with open(CONTAINERS, encoding="utf-8") as handle:
                record = json.load(handle)
        except FileNotFoundError:
            record = {}
        pods = self.api.call("GET", "/api/v1/pods?fieldSelector=spec.nodeName%3D" + urllib.parse.quote(name))
        seen = {}
        for pod in pods.get("items") or []:
            meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
            if spec.get("nodeName") != name or meta.get("deletionTimestamp"):
                continue
            if "kubernetes.io/config.mirror" in (meta.get("annotations") or {}):
                continue
            uid = meta.get("uid", "")
            running = record.get(uid)
            before = (status.get("containerStatuses") or [None])[0]
            if running is None:
                running = {
                    "containerID": f"containerd://{uuid.uuid4().hex}{uuid.uuid4().hex}",
                    "startedAt": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                    "restartCount": int(before["restartCount"]) + 1 if before else 0,
                }
            seen[uid] = running
            container = (spec.get("containers") or [{"name": "main"}])[0]
            wanted = {
                "name": container.get("name", "main"),
                "image": container.get("image", ""),
                # Every field a kubelet always sets (core/v1 ContainerStatus: name, ready, restartCount, image, imageID).
                "imageID": "sha256:" + hashlib.sha256(str(container.get("image", "")).encode()).hexdigest(),
                "containerID": running["containerID"],
                "restartCount": running["restartCount"],
                "ready": True,
                "started": True,
                "state": {"running": {"startedAt": running["startedAt"]}},
            }
            if before == wanted and status.get("startTime"):
                continue
            self.api.call(
                "PATCH",
                f"/api/v1/namespaces/{meta.get('namespace')}/pods/{meta.get('name')}/status",
                {
                    "status": {
                        "startTime": status.get("startTime") or running["startedAt"],
                        "containerStatuses": [wanted],
                    }
                },
                content_type="application/merge-patch+json",
            )
        if seen != record:
            os.makedirs(os.path.dirname(CONTAINERS), exist_ok=True)
            with open(CONTAINERS + ".tmp", "w", encoding="utf-8") as handle:
                json.dump(seen, handle)
            os.replace(CONTAINERS + ".tmp", CONTAINERS)

    def sync_mirror_pods(self) -> None:
        """As the kubelet does: a mirror pod in the API for each static pod, made again if deleted."""
        name = self.node["name"]
        for component in self.static_pods():
            path = f"/api/v1/namespaces/kube-system/pods/{component}-{name}"
            container: dict = {"name": component, "image": f"rancher/hardened-{component}"}
            if component == "kube-apiserver":
                container["args"] = list(self.loaded.get("apiserver_args") or [])
                container["env"] = [{"name": "FILE_HASH", "value": self.loaded.get("apiserver_file_hash", "")}]
            if self.api.exists(path):
                current = (self.api.call("GET", path).get("spec") or {}).get("containers") or [{}]
                if current[0] == container:
                    continue
                # The static pod's manifest changed at this start: the kubelet replaces its mirror pod,
                # deleting the old one at once (grace 0: kubernetes pkg/kubelet/pod/mirror_client.go).
                self.api.call("DELETE", path + "?gracePeriodSeconds=0")
            node = self.api.call("GET", f"/api/v1/nodes/{name}")
            self.api.call(
                "POST",
                "/api/v1/namespaces/kube-system/pods",
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": f"{component}-{name}",
                        "labels": {"component": component, "tier": "control-plane"},
                        "annotations": {
                            "kubernetes.io/config.mirror": hashlib.sha256(component.encode()).hexdigest()[:32],
                            "kubernetes.io/config.source": "file",
                        },
                        "ownerReferences": [
                            {
                                "apiVersion": "v1",
                                "kind": "Node",
                                "name": name,
                                "uid": node["metadata"]["uid"],
                                "controller": True,
                            }
                        ],
                    },
                    "spec": {
                        "nodeName": name,
                        "priorityClassName": "system-cluster-critical",
                        "containers": [container],
                    },
                },
            )

    def forward_api(self) -> None:
        """Listen on :6443 like the real apiserver; bytes are relayed to the API double."""
        target = self.api.url.split("://", 1)[1]
        host, port = target.rsplit(":", 1)
        listener = socket.create_server(("0.0.0.0", 6443), reuse_port=True)
        listener.settimeout(1)
        while not self.stopping.is_set():
            try:
                client, _address = listener.accept()
            except TimeoutError:
                continue
            try:
                upstream = socket.create_connection((host, int(port)), timeout=10)
            except OSError:
                client.close()
                continue
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=relay, args=(src, dst), daemon=True).start()
        listener.close()

    # -- life cycle ---------------------------------------------------------------------------------
    def load_until_usable(self) -> dict:
        """What the engine loads at start. A fatal problem ends the process; one the real engine only
        retries keeps it here, logging, for as long as it lasts: the unit stays 'activating'."""
        while True:
            try:
                return self.load()
            except EngineStuck as exc:
                log("error", f"{exc}; retrying in {REGISTRIES_RETRY_SECONDS}s")
                time.sleep(REGISTRIES_RETRY_SECONDS)

    def run(self) -> int:
        delay = lab_delay("start-delay")
        if delay:
            # A test can make start-up take a while, to act while a restart is in progress.
            log("info", f"start-up delayed {delay}s by {LAB_DIR}/start-delay")
            time.sleep(delay)
        try:
            loaded = self.load_until_usable()
        except EngineError as exc:
            log("fatal", str(exc))
            return 1
        previous = self.previous_loaded()
        if previous is not None and os.path.exists(os.path.join(LAB_DIR, KEEP_PREVIOUS)):
            log("warning", f"keeping the configuration of the previous start ({LAB_DIR}/{KEEP_PREVIOUS})")
            loaded = {**previous, "pid": loaded["pid"], "started_at": loaded["started_at"]}
        write_hosts_toml(self.flavor, self.data_dir, loaded.get("mirrors") or {})
        if self.role == "server":
            self.write_admin_kubeconfig()
            if self.flavor == "rke2":
                self.write_apiserver_manifest(loaded)
            threading.Thread(target=self.forward_api, daemon=True).start()
        self.loaded = loaded
        self.record(loaded)
        if os.path.exists(os.path.join(LAB_DIR, "kubelet-down")):
            # A test's way to have the engine signal READY while its kubelet never comes back (a server
            # signals READY once its apiserver answers, before its kubelet registers).
            log("error", f"kubelet not started ({LAB_DIR}/kubelet-down)")
        else:
            try:
                self.register_until_done()
            except (OSError, urllib.error.URLError) as exc:
                log("fatal", f"failed to register node with the apiserver: {exc}")
                return 1
            threading.Thread(target=self.lease_loop, daemon=True).start()
        if self.role == "server":
            threading.Thread(target=self.manifests_loop, daemon=True).start()
        sd_notify("READY=1")
        log("info", f"{self.flavor} {self.role} is up and running")
        signal.signal(signal.SIGTERM, lambda *_: self.stopping.set())
        signal.signal(signal.SIGINT, lambda *_: self.stopping.set())
        while not self.stopping.wait(3600):
            pass
        sd_notify("STOPPING=1")
        delay = lab_delay("stop-delay")
        if delay:
            # A test can make the shutdown take a while (the unit is "deactivating"), to act while a stop
            # is in progress. A lab knob, not a behaviour of the real engines.
            log("info", f"shutdown delayed {delay}s by {LAB_DIR}/stop-delay")
            time.sleep(delay)
        with open(os.path.join(self.state_dir, "stops.log"), "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"stopped_at": time.time()}) + "\n")
        # Nothing is posted to the API on the way down: the node stays Ready until the grace period ends.
        log("info", "Shutting down")
        return 0


def manifest_files(directory: str) -> list[str]:
    """The files the deploy controller applies: YAML or JSON, not hidden, without a ``.skip`` beside."""
    found = []
    for path in sorted(glob.glob(os.path.join(directory, "*"))):
        if not path.endswith(MANIFEST_SUFFIXES) or not os.path.isfile(path):
            continue  # glob leaves dotfiles out, as the deploy controller does
        if os.path.exists(path + ".skip"):
            continue
        found.append(path)
    return found


def relay(src: socket.socket, dst: socket.socket) -> None:
    try:
        while chunk := src.recv(65536):
            dst.sendall(chunk)
    except OSError:
        pass
    finally:
        for sock in (src, dst):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def sd_notify(message: str) -> None:
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return
    if address.startswith("@"):
        address = "\0" + address[1:]
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.connect(address)
        sock.sendall(message.encode())


def main(argv: list[str]) -> int:
    flavor = flavor_of(argv[0])
    args = argv[1:]
    # No argument and --version were answered above, before the imports.
    if args[0] not in ("server", "agent"):
        print(f"Incorrect Usage. flag provided but not defined: {args[0]}", file=sys.stderr)
        return 1
    return Engine(flavor, args[0], args[1:]).run()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
