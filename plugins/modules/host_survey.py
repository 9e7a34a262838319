#!/usr/bin/python
# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: host_survey
short_description: Everything the read-only phases read from a host, in one round
version_added: 0.1.0
description:
  - Runs the read-only calls it is given, each the same code as the module named
    (M(cargoship.engine.host_info), M(cargoship.engine.host_lock), M(cargoship.engine.engine_info),
    M(cargoship.engine.engine_config)), always in check mode, in one connection to the host, and returns
    every answer beside the arguments it was given. Nothing is changed.
  - A later task of one of those modules given the survey (its O(cargoship.engine.host_info#module:survey)
    option) gets the answer to a call with the same arguments on the control host, without going to the
    host again. M(cargoship.engine.host_info) answers hold in a real run too; those of
    M(cargoship.engine.engine_info), M(cargoship.engine.host_lock) and M(cargoship.engine.engine_config)
    only in check mode, since a real run reads what runs change again, once it holds the lock.
  - A call that fails is answered with its failure, which the later task reports in its own phase; the
    survey itself fails only if it cannot run.
  - The credentials of an engine_config call are moved out of its arguments on the control host (by
    this module's action plugin) and travel in O(credentials), which is never logged.
author:
  - cargoship developers (@cargoship)
extends_documentation_fragment:
  - cargoship.engine._attributes
  - cargoship.engine._attributes.no_diff
options:
  calls:
    description:
      - The calls to answer, in order. Each has C(module) (one of V(host_info), V(host_lock),
        V(engine_info), V(engine_config)), C(args), the arguments the later task will give, and
        optionally C(phase), the phase whose read it is.
      - An engine_config call without C(layout) takes the C(settings) of the engine_info call before it,
        as the phases pass them.
      - Without it, the calls are the reads that the phases of the run declare (C(read) in each phase's
        C(vars/main.yml)), rendered for the host on the control host exactly as each phase renders its
        own (M(cargoship.engine.phase_read)); in check mode every planned phase's read, in a real run only
        the reads declared to hold there.
    type: list
    elements: dict
  selected:
    description:
      - Without O(calls), the phase run alone (C(cargoship_phase)); only the reads of the phases it runs
        are asked. Empty asks those of every phase.
    type: str
    default: ""
  credentials:
    description: Set by the action plugin, one list per call; never set it yourself.
    type: list
    elements: raw
    default: []
"""

EXAMPLES = r"""
- name: Survey each host once
  cargoship.engine.host_survey:
    calls:
      - module: host_info
        args: {gather: [os]}
      - module: engine_info
        args: {engine: k3s, node_role: agent}
  become: true
  register: survey

- name: Survey each host for the reads the run's phases declare
  cargoship.engine.host_survey:
    selected: "{{ cargoship_phase | default('') }}"
  become: true
  register: connect_survey

- name: Answered from the survey, on the control host
  cargoship.engine.engine_info:
    engine: k3s
    node_role: agent
    survey: "{{ survey }}"
"""

RETURN = r"""
answers:
  description:
    - One per call, in order; C(module), C(args) (as given, without credentials), C(result), and C(phase)
      for the read of a phase.
  returned: always
  type: list
  elements: dict
diff_mode:
  description: Whether the answers were made in diff mode (an answer holds for a task in the same mode).
  returned: always
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.cargoship.engine.plugins.module_utils._survey import READERS, run_calls


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "calls": {"type": "list", "elements": "dict"},
            "selected": {"type": "str", "default": ""},
            "credentials": {"type": "list", "elements": "raw", "no_log": True, "default": []},
        },
        supports_check_mode=True,
    )
    calls = module.params["calls"] or []
    for call in calls:
        if call.get("module") not in READERS:
            module.fail_json(
                msg=f"host_survey answers calls of {', '.join(sorted(READERS))}, not {call.get('module')!r}"
            )
    answers = run_calls(module, calls, module.params["credentials"])
    module.exit_json(changed=False, answers=answers, diff_mode=bool(module._diff))


if __name__ == "__main__":
    main()
