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
        V(engine_info), V(engine_config)) and C(args), the arguments the later task will give.
      - An engine_config call without C(layout) takes the C(settings) of the engine_info call before it,
        as the phases pass them.
    type: list
    elements: dict
    required: true
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

- name: Answered from the survey, on the control host
  cargoship.engine.engine_info:
    engine: k3s
    node_role: agent
    survey: "{{ survey }}"
"""

RETURN = r"""
answers:
  description: One per call, in order; C(module), C(args) (as given, without credentials) and C(result).
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
            "calls": {"type": "list", "elements": "dict", "required": True},
            "credentials": {"type": "list", "elements": "raw", "no_log": True, "default": []},
        },
        supports_check_mode=True,
    )
    for call in module.params["calls"]:
        if call.get("module") not in READERS:
            module.fail_json(
                msg=f"host_survey answers calls of {', '.join(sorted(READERS))}, not {call.get('module')!r}"
            )
    answers = run_calls(module, module.params["calls"], module.params["credentials"])
    module.exit_json(changed=False, answers=answers, diff_mode=bool(module._diff))


if __name__ == "__main__":
    main()
