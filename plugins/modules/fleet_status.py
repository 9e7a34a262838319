#!/usr/bin/python
# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: fleet_status
short_description: Map which configuration each node of the cluster runs, from the Kubernetes API alone
version_added: 0.3.0
description:
  - For each inventory host in O(controllers) and O(workers), works out the digest of the desired state its own
    variables give it (as M(cargoship.engine.engine_proof) stamps it; credentials masked). Lists the cluster's
    nodes and the kube-apiserver mirror pods (two API calls, whatever the fleet's size) and matches each host
    to its node - by the stamp's host, else by name, else by the host's C(ansible_host) among the node's
    addresses.
  - Each node is V(proven) (its stamp is the inventory's desired state and its engine's evidence is the one
    it was proven with), V(changed since proven) (same stamp, but the engine has started since with other
    arguments or files), V(not the desired state) (proven to run another desired state), V(unproven) (no
    stamp), or V(not in the inventory).
  - No host is connected to. Runs on the control host as an action; nothing is changed.
author:
  - cargoship developers (@cargoship)
extends_documentation_fragment:
  - cargoship.engine._attributes
  - cargoship.engine._attributes.no_diff
  - cargoship.engine._kube_access
options:
  controllers:
    description: The inventory hosts that are the cluster's controllers.
    type: list
    elements: str
    default: []
  workers:
    description: The inventory hosts that are its workers.
    type: list
    elements: str
    default: []
"""

EXAMPLES = r"""
- name: Map the fleet
  cargoship.engine.fleet_status:
    controllers: "{{ groups['cargoship_controllers'] }}"
    workers: "{{ groups['cargoship_workers'] }}"
  register: fleet_map
"""

RETURN = r"""
fleet:
  description:
    - C(nodes) (per node - C(host), C(role), C(status), C(desired) and C(proven) digests, C(run)), C(by_digest)
      (the nodes grouped by the digest they were proven to run), C(unproven), C(hosts_without_node), C(counts)
      per status, and C(converged) (every node proven to run the inventory's desired state).
  returned: success
  type: dict
lines:
  description: The map as text, a line each.
  returned: success
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.cargoship.engine.plugins.module_utils._kube_access import ARGUMENT_SPEC


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "controllers": {"type": "list", "elements": "str", "default": []},
            "workers": {"type": "list", "elements": "str", "default": []},
            **ARGUMENT_SPEC,
        },
        supports_check_mode=True,
    )
    module.fail_json(msg="fleet_status runs on the control host as an action; it cannot run as a module")


if __name__ == "__main__":
    main()
