#!/usr/bin/python
# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: validate_input
short_description: Validate the cargoship inventory before any host is contacted
version_added: 0.1.0
description:
  - Runs on the control host only (an action plugin). Checks the C(cargoship_*) variables of every
    host in the play - engine, registries, audit policy, pod security, chart values, profile and run
    options - and fails naming the host and the key path of the first problem, such as
    C(cargoship_registries.mirrors["docker.io"].endpont).
  - Unknown C(cargoship_*) variables (usually misspellings) are errors too.
author:
  - cargoship developers (@cargoship)
extends_documentation_fragment:
  - cargoship.engine._attributes
  - cargoship.engine._attributes.no_diff
options:
  hosts:
    description: The hosts whose variables to check.
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: Validate the inventory
  cargoship.engine.validate_input:
    hosts: "{{ ansible_play_hosts_all }}"
  run_once: true
  delegate_to: localhost
"""

RETURN = r"""
checked:
  description: How many hosts were checked.
  returned: always
  type: int
"""
