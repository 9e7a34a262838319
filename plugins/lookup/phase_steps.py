# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: phase_steps
short_description: A host's steps through cargoship phases and user hooks (and the dry-run gate)
version_added: 0.1.0
description:
  - For the play given, returns the steps a host runs there, each C(role), C(entry) (its tasks file)
    and C(point) (the hook point, for hook steps). These are the phases that declare that play
    (C(roles/<phase>/vars/main.yml)), in their declared order. The playbook names no phase, so a phase
    is added by adding its role.
  - The dry-run gate. Outside check mode, or when the phase declares a dry run may run it, the entry
    is C(main); otherwise the phase's read-only C(assess) tasks; a phase with neither is left out
    (reported unassessed). A phase with no dry-run declaration is therefore never run by a dry run.
  - Hooks. C(<phase>.before.<role>) hooks come just before the phase and C(<phase>.after.<role>) hooks just
    after it (the hooks role picks those of the host's node role, controller or worker). The sync phases
    run their hooks themselves, around each node's own restart. The C(cluster_ready) stage comes first in
    the C(finish) play, when the run includes a per-node phase; it acts on the first controller only.
  - C(cargoship_hooks) is validated here, before any host is contacted.
author:
  - cargoship developers (@cargoship)
options:
  play:
    description: The play of the operation's playbook whose steps to return.
    type: str
    required: true
    choices: [prepare, controllers, workers, finish]
  operation:
    description: The operation whose phases to run.
    type: str
    default: engine-config-sync
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
  scope:
    description:
      - In a dry run, return only the steps a dry run does in this way (each phase declares it,
        C(dry_run_scope)), V(each host) (the phase's own tasks on every host), V(once) (its own tasks once
        for the play) or V(play) (the play's assessment, M(cargoship.engine.assess_play), does them for all
        of the play's hosts at once). Empty returns every step. Ignored outside check mode.
    type: str
    default: ""
    choices: ["", each host, once, play]
  stopped:
    description:
      - Whether a phase failed earlier in the run. Only the phases declared C(runs_after_failure) are
        returned then (the lock release and the clean-up), without hooks.
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
  loop: "{{ query('cargoship.engine.phase_steps', play='prepare', check_mode=ansible_check_mode) }}"
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

from ansible_collections.cargoship.engine.plugins.plugin_utils._phases import load_phases, play_steps


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        if terms:
            raise AnsibleLookupError("phase_steps takes no phase names: the phases declare their play (play=...)")
        try:
            return play_steps(
                load_phases(operation=self.get_option("operation")),
                self.get_option("play"),
                self.get_option("selected"),
                self.get_option("hooks") or {},
                bool(self.get_option("check_mode")),
                bool(self.get_option("stopped")),
                self.get_option("scope"),
            )
        except ValueError as exc:  # UnknownPhase included
            raise AnsibleLookupError(str(exc)) from exc
