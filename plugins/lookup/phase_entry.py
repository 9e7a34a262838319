# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: phase_entry
short_description: Which entry point of a cargoship phase role a run may include (the dry-run gate)
version_added: 0.1.0
description:
  - Reads the phase's declaration (C(roles/<phase>/vars/main.yml)) and answers V(main) outside check
    mode or when the phase declares a dry run may run it; otherwise V(assess) when the phase has a
    read-only assessment (C(tasks/assess.yml)), else V(none) (the phase is reported unassessed).
  - A phase with no dry-run declaration is therefore never run by a dry run.
author:
  - cargoship developers (@cargoship)
options:
  _terms:
    description: The phase (its role name).
    required: true
    type: list
    elements: str
  check_mode:
    description: Whether the run is a dry run (pass C(ansible_check_mode)).
    type: bool
    required: true
"""

EXAMPLES = r"""
- name: Run or assess phase sync_worker
  ansible.builtin.include_role:
    name: cargoship.engine.sync_worker
    tasks_from: "{{ lookup('cargoship.engine.phase_entry', 'sync_worker', check_mode=ansible_check_mode) }}"
  when: lookup('cargoship.engine.phase_entry', 'sync_worker', check_mode=ansible_check_mode) != 'none'
"""

RETURN = r"""
_raw:
  description: V(main), V(assess) or V(none), one per phase given.
  type: list
  elements: str
"""

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.cargoship.engine.plugins.plugin_utils._phases import entry_point, load_phases


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        phases = {p["name"]: p for p in load_phases()}
        entries = []
        for term in terms:
            if term not in phases:
                raise AnsibleLookupError(f"unknown phase {term!r}; phases: {', '.join(phases)}")
            entries.append(entry_point(phases[term], bool(self.get_option("check_mode"))))
        return entries
