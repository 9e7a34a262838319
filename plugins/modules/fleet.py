#!/usr/bin/python
# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: fleet
short_description: Tell the cluster's controllers and workers apart by the inventory's own group names
version_added: 0.2.0
description:
  - Runs on the control host only (an action plugin); contacts no host.
  - A host is a controller when it is a member of the group its C(cargoship_controllers_group) variable
    names (default V(controllers)), a worker when it is a member of the group its
    C(cargoship_workers_group) names (default V(workers)). The variables may be set wherever Ansible
    reads variables (inventory, C(group_vars), C(host_vars), extra vars), so an existing inventory with
    groups such as C(server) and C(agent) works as it is.
  - A play's C(hosts) cannot read inventory variables, which is why the groups are resolved here and the
    playbooks then work on the groups M(ansible.builtin.group_by) makes from the result.
  - Fails, naming the cause, when the inventory has no hosts, when a host is in both groups, or when none of
    O(hosts) (the hosts the run selects, after C(--limit)) is a controller or a worker.
author:
  - cargoship developers (@cargoship)
extends_documentation_fragment:
  - cargoship.engine._attributes
  - cargoship.engine._attributes.no_diff
options:
  hosts:
    description: The hosts the run selects (usually C(ansible_play_hosts_all)).
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: Find the controllers and workers
  cargoship.engine.fleet:
    hosts: "{{ ansible_play_hosts_all }}"
  run_once: true
  register: found
"""

RETURN = r"""
controllers:
  description: Every controller in the inventory, in inventory order, whatever the C(--limit).
  returned: success
  type: list
  elements: str
workers:
  description: Every worker in the inventory, in inventory order.
  returned: success
  type: list
  elements: str
targets:
  description: The controllers and workers among O(hosts), controllers first.
  returned: success
  type: list
  elements: str
controller_addresses:
  description:
    - Where each controller of RV(controllers) is, as the inventory tells (its C(ansible_host), else its name).
    - The other API servers that the modules of the C(cargoship.engine.kubernetes) group may turn to when
      the kubeconfig's server does not answer (their O(cargoship.engine.cluster_node#module:fallback_hosts)).
  returned: success
  type: list
  elements: str
"""
