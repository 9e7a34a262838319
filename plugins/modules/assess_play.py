#!/usr/bin/python
# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: assess_play
short_description: A dry run's assessment of one play, for all of its hosts at once
version_added: 0.1.0
description:
  - In a dry run (check mode only), assesses every planned phase of one play of the engine-config-sync
    playbook whose dry-run scope is V(play) (C(dry_run_scope) in the phase's declaration, the default),
    for all of the play's hosts at once, on the control host, from the answers of the connect phase's
    survey (M(cargoship.engine.host_survey), registered as C(connect_survey) on each host).
  - Gives back, for each host and phase, the result the phase's own task would have given
    (RV(cargoship_assessed)); the C(cargoship.engine.report) callback builds the run report from them.
  - The Kubernetes API is asked once per play (the nodes are known, the drain assessment of all the
    play's nodes, the chart values no longer in the inventory); the hosts are not contacted.
  - Fails when a phase fails on a host (the lock is held, the engine would be downgraded, the hosts do not
    pass their checks); the play's later phases are then not assessed, as a real run stops there.
  - Runs on the control host as an action; the module itself only documents it.
author:
  - cargoship developers (@cargoship)
extends_documentation_fragment:
  - cargoship.engine._attributes
  - cargoship.engine._attributes.no_diff
options:
  play:
    description: The play whose phases to assess.
    type: str
    required: true
    choices: [prepare, controllers, workers, finish]
  hosts:
    description: The play's hosts (pass C(ansible_play_hosts)).
    type: list
    elements: str
    required: true
  selected:
    description: The phase run alone (pass C(cargoship_phase)); empty assesses every phase.
    type: str
    default: ""
  hooks:
    description: The user's hooks (pass C(cargoship_hooks)); the report lists those each host would run.
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: Assess the preparation phases for every host at once
  cargoship.engine.assess_play:
    play: prepare
    hosts: "{{ ansible_play_hosts }}"
    selected: "{{ cargoship_phase | default('') }}"
    hooks: "{{ cargoship_hooks | default({}) }}"
  run_once: true
  delegate_to: localhost
  when: ansible_check_mode
"""

RETURN = r"""
cargoship_assessed:
  description: For each host and phase, in order, what the phase's own task would have given.
  returned: always
  type: list
  elements: dict
  contains:
    host:
      description: The host.
      type: str
    phase:
      description: The phase, or V(hooks) for the hooks listed at a hook point.
      type: str
    task:
      description: The name of the phase's task the result stands for.
      type: str
    status:
      description: V(ok), V(changed) or V(failed).
      type: str
    result:
      description: The result.
      type: dict
stopped_by:
  description: The host whose failure stopped the play.
  returned: when failed
  type: str
"""

from ansible.module_utils.basic import AnsibleModule


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "play": {"type": "str", "required": True, "choices": ["prepare", "controllers", "workers", "finish"]},
            "hosts": {"type": "list", "elements": "str", "required": True},
            "selected": {"type": "str", "default": ""},
            "hooks": {"type": "dict", "default": {}},
        },
        supports_check_mode=True,
    )
    module.fail_json(msg="assess_play runs on the control host as an action; it cannot run as a module")


if __name__ == "__main__":
    main()
