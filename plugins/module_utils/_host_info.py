# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read a host's operating system, network, clock and firewall.

The logic of the host_info module, here so that host_survey runs the same code in its one round."""

from __future__ import annotations

import os
import platform
import socket
import time

from ansible_collections.cargoship.engine.plugins.module_utils._engines import SUPPORTED_OS
from ansible_collections.cargoship.engine.plugins.module_utils._outcome import Failed

GO_ARCH = {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm", "s390x": "s390x", "ppc64le": "ppc64le"}


def os_release() -> dict:
    values = {}
    for path in ("/etc/os-release", "/usr/lib/os-release"):
        if os.path.exists(path):
            with open(path, encoding="utf-8") as handle:
                for line in handle:
                    key, sep, value = line.strip().partition("=")
                    if sep:
                        values[key.lower()] = value.strip('"')
            break
    machine = platform.machine()
    return {
        "id": values.get("id", "unknown"),
        "version_id": values.get("version_id", ""),
        "pretty_name": values.get("pretty_name", ""),
        "kernel": platform.release(),
        "arch": GO_ARCH.get(machine, machine),
    }


def network() -> dict:
    interface = None
    try:
        with open("/proc/net/route", encoding="utf-8") as handle:
            for line in handle.readlines()[1:]:
                fields = line.split()
                if fields[1] == "00000000":
                    interface = fields[0]
                    break
    except OSError:
        pass
    address = None
    try:
        # Connecting a UDP socket sends nothing; it only asks the kernel which source address it would use.
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("192.0.2.1", 9))
            address = probe.getsockname()[0]
    except OSError:
        pass
    return {"hostname": socket.gethostname(), "private_interface": interface, "private_address": address}


def firewall(module) -> dict:
    nft = module.get_bin_path("nft")
    if nft:
        rc, out, _err = module.run_command([nft, "list", "ruleset"])
        if rc == 0:
            for line in out.splitlines():
                if "hook input" in line:
                    return {"tool": "nft", "input_policy": "drop" if "policy drop" in line else "accept"}
            return {"tool": "nft", "input_policy": "accept"}
    iptables = module.get_bin_path("iptables")
    if iptables:
        rc, out, _err = module.run_command([iptables, "-S", "INPUT"])
        if rc == 0:
            return {"tool": "iptables", "input_policy": "drop" if "-P INPUT DROP" in out else "accept"}
    return {"tool": "none", "input_policy": "unknown"}


# What AnsibleModule is given: the module's arguments and their rules.
MODULE_KWARGS = {
    "argument_spec": {
        # Taken by the action plugin (an answer of host_survey); the module never sees it.
        "survey": {"type": "dict"},
        "gather": {
            "type": "list",
            "elements": "str",
            "default": ["os"],
            "choices": ["os", "network", "clock", "firewall"],
        },
        "supported_os": {"type": "list", "elements": "str", "default": list(SUPPORTED_OS)},
        "reference_epoch": {"type": "float"},
    },
    "supports_check_mode": True,
}


def run(module) -> dict:
    """The module's work: its result, or Failed."""
    result: dict = {"changed": False}
    gather = set(module.params["gather"])
    if "os" in gather:
        result["os"] = os_release()
        supported = module.params["supported_os"]
        if supported and result["os"]["id"] not in supported:
            name = result["os"]["pretty_name"] or result["os"]["id"]
            raise Failed(f"{name} is not supported; supported: {', '.join(supported)}", **result)
    if "network" in gather:
        result["network"] = network()
    if "clock" in gather:
        now = time.time()
        reference = module.params["reference_epoch"]
        result["clock"] = {"epoch": now, "skew": now - reference if reference is not None else None}
    if "firewall" in gather:
        result["firewall"] = firewall(module)
    return result
