#!/usr/bin/python
# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: phase_report
short_description: Tell the cargoship report where a host is in an operation
version_added: 0.1.0
description:
  - Runs on the control host only (an action plugin); nothing is sent to the managed host.
  - Marks the start of a phase for a host and how it runs (V(run), V(assess), V(unassessed),
    V(disabled)), or adds changes that a phase would make or made, for the report.
author:
  - cargoship developers (@cargoship)
extends_documentation_fragment:
  - cargoship.engine._attributes
  - cargoship.engine._attributes.no_diff
options:
  phase:
    description: The phase (role name).
    type: str
    required: true
  mode:
    description: How the phase runs on this host; omit when only adding changes.
    type: str
    choices: [run, assess, unassessed, disabled]
  reason:
    description: Why the phase is unassessed or disabled.
    type: str
  changes:
    description: Changes to report for this host (strings or dicts).
    type: list
    elements: raw
    default: []
"""

EXAMPLES = r"""
- name: Report the restart a dry run found necessary
  cargoship.engine.phase_report:
    phase: sync_worker
    changes:
      - restart k3s-agent
"""

RETURN = r"""
cargoship_phase:
  description: The phase, mode, reason and changes as given.
  returned: always
  type: dict
"""
