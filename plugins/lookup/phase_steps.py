# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: phase_steps
short_description: A host's steps through cargoship phases and user hooks (and the dry-run gate)
version_added: 0.1.0
description:
  - For the phases given, in order, returns the steps a host runs, each C(role), C(entry) (its
    tasks file) and C(point) (the hook point, for hook steps).
  - The dry-run gate. Outside check mode, or when the phase declares a dry run may run it, the entry
    is C(main); otherwise the phase's read-only C(assess) tasks; a phase with neither is left out
    (reported unassessed). A phase with no dry-run declaration is therefore never run by a dry run.
  - Hooks. C(<phase>.before.<role>) hooks come just before the phase and C(<phase>.after.<role>) hooks just
    after it (the hooks role picks those of the host's node role, controller or worker). The sync phases
    run their hooks themselves, around each node's own restart. With O(cluster_ready), the C(cluster_ready)
    stage comes first, when the run includes a sync phase; it acts on the first controller only.
  - C(cargoship_hooks) is validated here, before any host is contacted.
author:
  - cargoship developers (@cargoship)
options:
  _terms:
    description: The phases (role names), in order.
    required: true
    type: list
    elements: str
  check_mode:
    description: Whether the run is a dry run (pass C(ansible_check_mode)).
    type: bool
    required: true
  selected:
    description:
      - Run only this phase, with the read-only phases it needs and, if it changes hosts, the lock
        around it (pass C(cargoship_phase)). Empty runs every phase.
    type: str
    default: ""
  hooks:
    description: The user's hooks (pass C(cargoship_hooks)).
    type: dict
    default: {}
  cluster_ready:
    description: Whether this is where the C(cluster_ready) stage belongs (after the sync phases).
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Run phases and hooks
  ansible.builtin.include_role:
    name: "cargoship.engine.{{ step.role }}"
    tasks_from: "{{ step.entry }}"
  vars:
    hooks_point: "{{ step.point }}"
  loop: "{{ query('cargoship.engine.phase_steps', 'connect', 'detect_os', check_mode=ansible_check_mode) }}"
  loop_control:
    loop_var: step
"""

RETURN = r"""
_raw:
  description: The steps, each a dict with C(role), C(entry) and C(point) (C(<phase>.before|after) or C(cluster_ready) for hook steps).
  type: list
  elements: dict
"""

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.cargoship.engine.plugins.plugin_utils import _hooks
from ansible_collections.cargoship.engine.plugins.plugin_utils._phases import (
    UnknownPhase,
    entry_point,
    load_phases,
    plan,
)


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        variables = variables or {}
        declared = load_phases()
        by_name = {p["name"]: p for p in declared}
        hooks = self.get_option("hooks") or {}
        try:
            planned = plan(declared, self.get_option("selected"))
            _hooks.validate(hooks, declared)
        except (UnknownPhase, ValueError) as exc:
            raise AnsibleLookupError(str(exc)) from exc
        unknown = [t for t in terms if t not in by_name]
        if unknown:
            raise AnsibleLookupError(f"unknown phase {unknown[0]!r}; phases: {', '.join(by_name)}")
        check_mode = bool(self.get_option("check_mode"))
        phases = [by_name[t] for t in terms if t in planned]
        steps = _hooks.steps(phases, hooks, lambda phase: entry_point(phase, check_mode))
        syncs = any(by_name[name]["per_node"] for name in planned)
        if self.get_option("cluster_ready") and hooks.get(_hooks.CLUSTER_READY) and syncs:
            # Every host gets the step (the same include for all); it acts on the first controller only.
            steps.insert(0, {"role": "hooks", "entry": "cluster_ready", "point": _hooks.CLUSTER_READY})
        return steps
