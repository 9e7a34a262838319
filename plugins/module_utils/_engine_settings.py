# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The engine's settings on a host, read the way the engine itself reads them.

Where k3s and RKE2 take a setting from (their source: pkg/configfilearg, pkg/cli/cmds): the flags
of the unit's command line win; then the config file, ``--config`` (or ``K3S_CONFIG_FILE`` /
``RKE2_CONFIG_FILE`` in the unit's environment, else ``/etc/rancher/<engine>/config.yaml``),
followed by the ``.yaml``/``.yml`` files of ``<config>.d/`` in directory order, hidden ones
included, the last value of a key winning; then the unit's environment; then the default.
"""

from __future__ import annotations

import os
import re
import shlex
import socket

from ansible_collections.cargoship.engine.plugins.module_utils._engines import ENGINES

# Settings cargoship needs, with their short flags and environment variables (<ENGINE>_ prefixed).
SETTINGS = {
    "config": {"short": "c", "env": "CONFIG_FILE"},
    "node-name": {"env": "NODE_NAME"},
    "with-node-id": {"flag": True},
    "data-dir": {"short": "d", "env": "DATA_DIR"},
    "private-registry": {},
    "profile": {},
    # Where a server writes its admin kubeconfig (--write-kubeconfig, -o; <ENGINE>_KUBECONFIG_OUTPUT).
    "write-kubeconfig": {"short": "o", "env": "KUBECONFIG_OUTPUT"},
}


# The properties of the engine's unit that say how systemd starts it (see invocation).
INVOCATION_PROPERTIES = ("ExecStart", "Environment", "EnvironmentFiles")


def invocation(props: dict) -> tuple[list[str], dict[str, str]]:
    """The engine's command line and environment as its systemd unit starts it, from the unit's
    INVOCATION_PROPERTIES (``systemctl show``)."""
    match = re.search(r"argv\[\]=(.*?) ;", props.get("ExecStart", ""))
    try:
        argv = shlex.split(match.group(1)) if match else []
    except ValueError:
        argv = match.group(1).split() if match else []
    env: dict[str, str] = {}
    for entry in re.findall(r"(\S+?) \(ignore_errors=\w+\)", props.get("EnvironmentFiles", "")):
        env.update(read_env_file(entry))
    try:
        assignments = shlex.split(props.get("Environment", ""))
    except ValueError:
        assignments = props.get("Environment", "").split()
    for assignment in assignments:
        key, sep, value = assignment.partition("=")
        if sep:
            env[key] = value
    return argv, env


def read_env_file(path: str) -> dict[str, str]:
    env = {}
    try:
        with open(path, encoding="utf-8") as handle:
            for raw in handle:
                text = raw.strip()
                if not text or text.startswith("#"):
                    continue
                if text.startswith("export "):
                    text = text[len("export ") :]
                key, sep, value = text.partition("=")
                if sep:
                    env[key.strip()] = value.strip().strip("'\"")
    except OSError:
        pass
    return env


def flags_of(argv: list[str]) -> dict[str, object]:
    """The settings given as flags on the command line (``--name value``, ``--name=value``, ``-c value``)."""
    shorts = {spec["short"]: name for name, spec in SETTINGS.items() if "short" in spec}
    found: dict[str, object] = {}
    index = 0
    while index < len(argv):
        arg = argv[index]
        index += 1
        if not arg.startswith("-") or arg == "-":
            continue
        name, sep, value = arg.lstrip("-").partition("=")
        name = shorts.get(name, name)
        if name not in SETTINGS:
            continue
        if SETTINGS[name].get("flag"):
            found[name] = value.lower() not in ("false", "0") if sep else True
        elif sep:
            found[name] = value
        elif index < len(argv):
            found[name] = argv[index]
            index += 1
    return found


def config_files(config: str) -> list[str]:
    """The config file and its drop-ins, in the order the engine reads them."""
    found = [config] if os.path.isfile(config) else []
    directory = config + ".d"
    try:
        names = sorted(os.listdir(directory))  # hidden files too, as Go's filepath.Glob finds them
    except OSError:
        names = []
    found += [
        os.path.join(directory, n)
        for n in names
        if n.lower().endswith((".yaml", ".yml")) and os.path.isfile(os.path.join(directory, n))
    ]
    return found


def read_config(paths: list[str]) -> tuple[dict, dict[str, str], list[str]]:
    """The merged settings of the config files; where each key was last set; and the files that could not
    be read as YAML (with why)."""
    merged: dict = {}
    origin: dict[str, str] = {}
    problems: list[str] = []
    for path in paths:
        try:
            with open(path, encoding="utf-8") as handle:
                data = load_yaml(handle.read())
        except (OSError, ValueError) as exc:
            problems.append(f"{path}: {exc}")
            continue
        if data is None:
            continue
        if not isinstance(data, dict):
            problems.append(f"{path}: the top level is not a mapping")
            continue
        for key, value in data.items():
            name = str(key)
            if name.endswith("+"):
                name = name[:-1]
                previous = merged.get(name) or []
                previous = previous if isinstance(previous, list) else [previous]
                merged[name] = previous + (value if isinstance(value, list) else [value])
            else:
                merged[name] = value
            origin[name] = path
    return merged, origin, problems


def load_yaml(text: str) -> object:
    try:
        import yaml
    except ImportError:
        return top_level_scalars(text)
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(f"not valid YAML ({exc.__class__.__name__})") from None


def top_level_scalars(text: str) -> dict:
    """Without PyYAML on the host: the ``key: value`` lines at the top level, which is all a flat engine
    config needs for the settings read here (lists and nested values are left out)."""
    found: dict = {}
    for line in text.splitlines():
        match = re.match(r"^([A-Za-z0-9_.+-]+|\"[^\"]+\"|'[^']+'):(?:\s+(.*))?$", line)
        if not match:
            continue
        key = match.group(1).strip("\"'")
        value = (match.group(2) or "").split(" #", 1)[0].strip()
        if not value or value.startswith(("[", "{", "|", ">", "&", "*", "!")):
            continue
        if value[0] in "\"'" and value[-1] == value[0] and len(value) > 1:
            value = value[1:-1]
        elif value.lower() in ("true", "yes", "on"):
            value = True
        elif value.lower() in ("false", "no", "off"):
            value = False
        found[key] = value
    return found


def resolve(engine: str, argv: list[str], env: dict[str, str], hostname: str) -> dict:
    """The settings cargoship needs, each with where it came from."""
    known = ENGINES[engine]
    prefix = known["env_prefix"]
    flags = flags_of(argv[1:])
    config = flags.get("config") or env.get(prefix + "CONFIG_FILE") or known["config_file"]
    paths = config_files(str(config))
    settings, origin, problems = read_config(paths)
    resolved: dict = {"config_file": str(config), "config_files": paths, "config_problems": problems}
    defaults = {
        "node-name": (hostname.lower(), "the hostname, lower-cased"),
        "with-node-id": (False, "default"),
        "data-dir": (known["data_dir"], "default"),
        "private-registry": (known["private_registry"], "default"),
        "profile": (None, "default"),
        "write-kubeconfig": (known["admin_kubeconfig"], "default"),
    }
    for name, (default, default_origin) in defaults.items():
        env_name = prefix + SETTINGS[name]["env"] if "env" in SETTINGS[name] else None
        if name in flags:
            value, source = flags[name], "the unit's command line"
        elif name in settings:
            value, source = settings[name], origin[name]
        elif env_name and env.get(env_name):
            value, source = env[env_name], f"{env_name} in the unit's environment"
        else:
            value, source = default, default_origin
        key = name.replace("-", "_")
        resolved[key] = value
        resolved[key + "_from"] = source
    return resolved


def hostname() -> str:
    return socket.gethostname()
