# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The installed engine, its version, units and settings.

The logic of the engine_info module, here so that host_survey runs the same code in its one round."""

from __future__ import annotations

import re

from ansible_collections.cargoship.engine.plugins.module_utils import _engine_settings
from ansible_collections.cargoship.engine.plugins.module_utils._engines import service_name
from ansible_collections.cargoship.engine.plugins.module_utils._engines import services as engine_services
from ansible_collections.cargoship.engine.plugins.module_utils._outcome import Failed
from ansible_collections.cargoship.engine.plugins.module_utils._systemd import show_units, unit_state

# A node name is a DNS-1123 subdomain (the API refuses anything else).
NODE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
# What engine_info reports of each of the engine's units.
UNIT_PROPERTIES = ("LoadState", "ActiveState", "SubState")
VERSION = re.compile(r"^(?:k3s|rke2) version (v\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.+-]*)?)")


def version_key(version: str) -> tuple:
    """Order v1.30.2+k3s1 < v1.30.2+k3s2 < v1.30.10+k3s1."""
    numbers = [int(n) for n in re.findall(r"\d+", version)]
    return tuple(numbers)


# What AnsibleModule is given: the module's arguments and their rules.
MODULE_KWARGS = {
    "argument_spec": {
        # Taken by the action plugin (an answer of host_survey); the module never sees it.
        "survey": {"type": "dict"},
        "engine": {"type": "str", "required": True, "choices": ["k3s", "rke2"]},
        "desired_version": {"type": "str"},
        "require_installed": {"type": "bool", "default": False},
        "forbid_downgrade": {"type": "bool", "default": False},
        "node_role": {"type": "str", "choices": ["server", "agent"]},
    },
    "supports_check_mode": True,
}


def run(module) -> dict:
    """The module's work: its result, or Failed."""
    engine = module.params["engine"]
    binary = module.get_bin_path(engine, opt_dirs=["/usr/local/bin", "/opt/rke2/bin"])
    version = None
    if binary:
        rc, out, err = module.run_command([binary, "--version"])
        match = VERSION.match(out.strip())
        if rc != 0 or not match:
            raise Failed(f"{binary} --version gave no version (rc={rc}): {(out or err).strip()[:200]}")
        version = match.group(1)
    role = module.params["node_role"]
    service = service_name(engine, role) if role else None
    # Every unit of the engine, and how the node's own one starts the engine, in one systemctl call.
    units = engine_services(engine)
    shown = show_units(
        module,
        [f"{unit}.service" for unit in units],
        list(UNIT_PROPERTIES + (_engine_settings.INVOCATION_PROPERTIES if service else ())),
    )
    services = {}
    for unit in units:
        props = shown.get(f"{unit}.service", {})
        if props.get("LoadState") == "loaded":
            services[unit] = unit_state(props)
    desired = module.params["desired_version"]
    if not desired:
        plan = "unknown"
    elif version is None:
        plan = "install"
    elif version == desired:
        plan = "same"
    else:
        plan = "upgrade" if version_key(desired) > version_key(version) else "downgrade"
    result = {"changed": False, "installed": binary is not None, "version": version, "plan": plan, "services": services}
    if service:
        result["service"] = service
        argv, env = _engine_settings.invocation(shown.get(f"{service}.service", {}))
        settings = _engine_settings.resolve(engine, argv, env, _engine_settings.hostname())
        result["settings"] = settings
        if settings["config_problems"]:
            raise Failed(
                "cannot read the engine's configuration, where its node name and paths come from: "
                + "; ".join(settings["config_problems"]),
                **result,
            )
        if settings["with_node_id"] is True:
            raise Failed(
                f"{service} runs with with-node-id ({settings['with_node_id_from']}): the engine adds a generated "
                "suffix to the node name, which cargoship cannot tell from the host; set node-name instead",
                **result,
            )
        if not isinstance(settings["node_name"], str) or not NODE_NAME.match(settings["node_name"]):
            raise Failed(
                f"node name {settings['node_name']!r} ({settings['node_name_from']}) is not a valid node name",
                **result,
            )
    if module.params["require_installed"] and binary is None:
        raise Failed(f"no {engine} installed; engine-config-sync only configures an installed engine", **result)
    if module.params["forbid_downgrade"] and plan == "downgrade":
        raise Failed(f"runs {version}, newer than the desired {desired}: refusing to downgrade", **result)
    return result
