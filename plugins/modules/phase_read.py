#!/usr/bin/python
# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: phase_read
short_description: What a phase reads on a host, as the phase declares it
version_added: 0.1.0
description:
  - Makes the read a phase declares (C(read) in its C(vars/main.yml)), one call of
    M(cargoship.engine.host_info), M(cargoship.engine.host_lock), M(cargoship.engine.engine_info) or
    M(cargoship.engine.engine_config), its arguments rendered from the inventory with this host's variables.
  - The connect phase's survey (M(cargoship.engine.host_survey) without calls) renders the same
    declarations in the same way, so given O(survey), the answer is taken on the control host without
    another round to the host wherever it holds (the rules of
    M(cargoship.engine.host_survey)); otherwise the module runs on the host.
  - Returns what the module named by the declaration returns.
  - Runs on the control host as an action; the module itself only documents it.
author:
  - cargoship developers (@cargoship)
extends_documentation_fragment:
  - cargoship.engine._attributes
  - cargoship.engine._attributes.no_diff
options:
  phase:
    description: The phase whose declared read to make.
    type: str
    required: true
  survey:
    description:
      - The registered result of the connect phase's M(cargoship.engine.host_survey) on this host, or of the
        lock phase's M(cargoship.engine.host_lock), whose answers were made under this run's lock.
    type: dict
  compared:
    description:
      - For the disconnect phase's clean-up in a real run, the registered result of this run's comparison of the
        host's files (M(cargoship.engine.engine_config), under the run's lock). Where it found no leftovers and
        nothing to change, this run wrote nothing there since, so the clean-up is answered as having nothing to
        do, without a round to the host. Ignored for any other read.
    type: dict
  synced:
    description:
      - With O(compared), whether this run's sync of the host finished. Every write a finished sync made there
        completed (a write leaves a temporary file only when it is interrupted, and an interrupted write fails
        the sync), so where the comparison found no leftovers the clean-up is answered as having nothing to do
        even though the sync changed files.
    type: bool
    default: false
  host:
    description:
      - Make the read of this host instead, its arguments rendered with its variables (give its survey
        as O(survey), and delegate the task to it, where it has to be asked).
    type: str
"""

EXAMPLES = r"""
- name: Read the operating system, kernel and architecture
  cargoship.engine.phase_read:
    phase: detect_os
    survey: "{{ connect_survey | default(omit) }}"
  register: detect_os_info
"""

RETURN = r"""
answered_by:
  description:
    - V(host_survey) when the answer came from the survey, V(host_lock) when it came from the lock's round
      (made under this run's lock), V(comparison) when it came from O(compared); absent when the host was asked.
  returned: when answered on the control host
  type: str
"""

from ansible.module_utils.basic import AnsibleModule


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "phase": {"type": "str", "required": True},
            "survey": {"type": "dict"},
            "compared": {"type": "dict"},
            "synced": {"type": "bool", "default": False},
            "host": {"type": "str"},
        },
        supports_check_mode=True,
    )
    module.fail_json(msg="phase_read runs on the control host as an action; it cannot run as a module")


if __name__ == "__main__":
    main()
