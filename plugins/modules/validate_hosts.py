#!/usr/bin/python
# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: validate_hosts
short_description: Check a fleet's host facts against each other before anything is changed
version_added: 0.1.0
description:
  - Runs on the control host only (an action plugin) over the facts the C(detect_os) and C(host_facts)
    phases registered (C(detect_os_info), C(host_facts_info)) for each host.
  - Fails, naming every offending host, when hostnames or private addresses are not unique, a CPU
    architecture is not one the engine ships for, a clock is skewed by more than O(max_clock_skew)
    seconds, or the firewall drops incoming traffic by default (the engine's ports would be unreachable).
author:
  - cargoship developers (@cargoship)
extends_documentation_fragment:
  - cargoship.engine._attributes
  - cargoship.engine._attributes.no_diff
options:
  hosts:
    description: The hosts to check.
    type: list
    elements: str
    required: true
  max_clock_skew:
    description: Largest allowed difference, in seconds, between a host's clock and the control host's.
    type: int
    default: 30
  architectures:
    description: CPU architectures the engine ships for.
    type: list
    elements: str
    default: [amd64, arm64, s390x]
"""

EXAMPLES = r"""
- name: Validate hosts
  cargoship.engine.validate_hosts:
    hosts: "{{ ansible_play_hosts }}"
  run_once: true
  delegate_to: localhost
"""

RETURN = r"""
problems:
  description: Every problem found, one line each (empty when the hosts are fine).
  returned: always
  type: list
  elements: str
"""
