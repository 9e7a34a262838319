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
  - cargoship.engine._survey
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
    description:
      - With V(os) gathered, fail unless the host's os-release C(ID) is one of these; V([]) checks nothing.
      - The default is every OS k3s and RKE2 are supported on.
    type: list
    elements: str
    default: [debian, ubuntu, rhel, rocky, almalinux, centos, sles, opensuse-leap, fedora]
  reference_epoch:
    description:
      - The control host's clock when the task started; with V(clock), C(clock.skew) is the difference.
      - The action plugin then narrows C(clock.skew) by the moment the answer came back, since the host read its
        clock somewhere between the two; the time the call took is not counted as skew.
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
  description:
    - C(epoch), the host's clock in seconds, and C(skew), its difference from O(reference_epoch).
    - As the action plugin returns it, C(skew) is the least difference the call's round trip allows and
      C(skew_range) the lowest and highest.
  returned: when clock is gathered
  type: dict
firewall:
  description: C(tool) (nft, iptables or none) and C(input_policy) (accept, drop or unknown).
  returned: when firewall is gathered
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.cargoship.engine.plugins.module_utils._host_info import MODULE_KWARGS, run
from ansible_collections.cargoship.engine.plugins.module_utils._outcome import finish


def main() -> None:
    finish(AnsibleModule(**MODULE_KWARGS), run)


if __name__ == "__main__":
    main()
