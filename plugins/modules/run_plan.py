#!/usr/bin/python
# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: run_plan
short_description: Write a reviewed plan at the end of a dry run, and check a real run against it
version_added: 0.3.0
description:
  - A plan records, for each host, what a dry run's decision was made from (the node's name, the engine, its
    version and unit state, the digest of the host's desired state with credentials masked, each managed file's
    fingerprint) and what was decided (each file change, and whether the node restarts in place, drained, or
    not at all, with why); for the fleet, the hosts, the cluster's nodes, what the run would change through
    the API besides (the HelmChartConfigs of charts no longer in the inventory it deletes, the profile labels
    it sets) and a salted PBKDF2 digest of the whole desired state. It holds no credential. Its digest is the sha256 of its canonical JSON.
  - V(written) makes the plan from the connect phase's survey of O(hosts) (the engine's read and the sync
    phases' comparisons), the hosts' variables and the cluster's node list, and writes it to O(path) (mode
    0600). It writes in check mode too, which is what it is for.
  - V(checked) refuses a plan file that was edited (its content does not give the digest it carries) or is
    not the reviewed one (O(expect_digest)); then makes the plan again from this run's survey and fails,
    naming each host and what differs (a file, the engine, the node, the desired state, the hosts or nodes),
    if anything does. Nothing is changed either way.
  - V(node_checked), for O(host) just before its sync touches it (under the run's lock), compares the host's
    entry made from O(engine) and O(compared) with the plan's, and fails naming what differs.
  - Runs on the control host as an action.
author:
  - cargoship developers (@cargoship)
extends_documentation_fragment:
  - cargoship.engine._attributes
  - cargoship.engine._attributes.no_diff
  - cargoship.engine._kube_access
options:
  state:
    description: What to do with the plan.
    type: str
    required: true
    choices: [written, checked, node_checked]
  path:
    description: The plan file on the control host.
    type: path
    required: true
  expect_digest:
    description: The digest of the reviewed plan; any other plan file is refused.
    type: str
  hosts:
    description: With V(written) or V(checked), the run's hosts (each surveyed by the connect phase).
    type: list
    elements: str
    default: []
  host:
    description: With V(node_checked), the inventory host about to be synced.
    type: str
  compared:
    description: With V(node_checked), the sync phase's comparison of the host's files (M(cargoship.engine.engine_config) in check mode).
    type: dict
  engine:
    description: With V(node_checked), the host's engine facts (M(cargoship.engine.engine_info)).
    type: dict
  restart:
    description: With V(node_checked), the restart mode the sync chose (C(mode), C(why)); checked to agree with the plan's rules.
    type: dict
"""

EXAMPLES = r"""
- name: Write the plan of this dry run
  cargoship.engine.run_plan:
    state: written
    path: /srv/plans/prod.plan.json
    hosts: "{{ ansible_play_hosts_all }}"
  run_once: true
  delegate_to: localhost

- name: Refuse a stale or edited plan before anything is changed
  cargoship.engine.run_plan:
    state: checked
    path: /srv/plans/prod.plan.json
    expect_digest: sha256:4f0c…
    hosts: "{{ ansible_play_hosts_all }}"
  run_once: true
  delegate_to: localhost
"""

RETURN = r"""
cargoship_plan:
  description:
    - With V(written), C(digest), C(file), C(written) and C(hosts_with_work); with V(checked), C(digest), C(file)
      and C(applied). The report keeps it.
  returned: with O(state=written) or O(state=checked), on success
  type: dict
msg:
  description: What was found; on a refusal, every difference, each naming its host.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.cargoship.engine.plugins.module_utils._kube_access import ARGUMENT_SPEC


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "state": {"type": "str", "required": True, "choices": ["written", "checked", "node_checked"]},
            "path": {"type": "path", "required": True},
            "expect_digest": {"type": "str"},
            "hosts": {"type": "list", "elements": "str", "default": []},
            "host": {"type": "str"},
            "compared": {"type": "dict"},
            "engine": {"type": "dict"},
            "restart": {"type": "dict"},
            **ARGUMENT_SPEC,
        },
        supports_check_mode=True,
    )
    module.fail_json(msg="run_plan runs on the control host as an action; it cannot run as a module")


if __name__ == "__main__":
    main()
