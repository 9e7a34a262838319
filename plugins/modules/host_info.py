#!/usr/bin/python
# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: host_info
short_description: Read only the host facts a cargoship phase needs
version_added: 0.1.0
description:
  - Reads the operating system (C(/etc/os-release)), kernel and CPU architecture, the hostname,
    the private interface and address (the interface of the default route), the host clock, and
    the firewall's input policy. Nothing is changed.
  - Much cheaper than full fact gathering; ask only for the groups you need.
author:
  - cargoship developers (@cargoship)
extends_documentation_fragment:
  - cargoship.engine._attributes
  - cargoship.engine._attributes.no_diff
options:
  gather:
    description: Which groups of facts to read.
    type: list
    elements: str
    default: [os]
    choices: [os, network, clock, firewall]
  supported_os:
    description: With V(os) gathered, fail unless the host's os-release C(ID) is one of these.
    type: list
    elements: str
  reference_epoch:
    description: The control host's clock when the task started; with V(clock), C(clock.skew) is the difference.
    type: float
"""

EXAMPLES = r"""
- name: Detect the operating system
  cargoship.engine.host_info:
    gather: [os]
  register: os_info

- name: Hostname and private address
  cargoship.engine.host_info:
    gather: [network, clock]
"""

RETURN = r"""
os:
  description: C(id), C(version_id), C(pretty_name) from os-release, C(kernel), C(arch) (Go-style, e.g. amd64).
  returned: when os is gathered
  type: dict
network:
  description: C(hostname), C(private_interface), C(private_address).
  returned: when network is gathered
  type: dict
clock:
  description: C(epoch), the host's clock in seconds, and C(skew), its difference from O(reference_epoch).
  returned: when clock is gathered
  type: dict
firewall:
  description: C(tool) (nft, iptables or none) and C(input_policy) (accept, drop or unknown).
  returned: when firewall is gathered
  type: dict
"""

import os
import platform
import socket
import time

from ansible.module_utils.basic import AnsibleModule

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


def firewall(module: AnsibleModule) -> dict:
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


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "gather": {
                "type": "list",
                "elements": "str",
                "default": ["os"],
                "choices": ["os", "network", "clock", "firewall"],
            },
            "supported_os": {"type": "list", "elements": "str"},
            "reference_epoch": {"type": "float"},
        },
        supports_check_mode=True,
    )
    result: dict = {"changed": False}
    gather = set(module.params["gather"])
    if "os" in gather:
        result["os"] = os_release()
        supported = module.params["supported_os"]
        if supported and result["os"]["id"] not in supported:
            name = result["os"]["pretty_name"] or result["os"]["id"]
            module.fail_json(msg=f"{name} is not supported; supported: {', '.join(supported)}", **result)
    if "network" in gather:
        result["network"] = network()
    if "clock" in gather:
        now = time.time()
        reference = module.params["reference_epoch"]
        result["clock"] = {"epoch": now, "skew": now - reference if reference is not None else None}
    if "firewall" in gather:
        result["firewall"] = firewall(module)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
