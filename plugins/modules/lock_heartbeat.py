#!/usr/bin/python
# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: lock_heartbeat
short_description: Keep this run's host lock fresh while the run lives
version_added: 0.1.0
description:
  - Runs on the control host only (an action plugin). Registers the host with the run's lock keeper,
    a process on the control host started by the first call of the run, which touches the host's
    lock every O(interval) seconds, over the host's own SSH connection settings, as long as the
    ansible-playbook process of the run lives. A lock is touched only while it names this run.
  - When the run ends in any way, SIGKILL included, the keeper exits within a second and the lock
    goes stale on its own after its stale window.
  - Under the C(cargoship) command the keeper also watches the command itself; if it dies (even by
    SIGKILL), the keeper ends the run's ansible-playbook so that no run goes on unsupervised.
  - Needs the C(ssh) connection (or C(local)) and, for a non-root remote user, passwordless sudo.
author:
  - cargoship developers (@cargoship)
extends_documentation_fragment:
  - cargoship.engine._attributes
  - cargoship.engine._attributes.no_diff
options:
  run_id:
    description: The run whose lock is kept.
    type: str
    required: true
  path:
    description: The lock file on the host.
    type: path
    default: /var/lib/cargoship/lock.json
  interval:
    description: Seconds between touches; keep it well below the stale window.
    type: int
    default: 30
"""

EXAMPLES = r"""
- name: Keep the lock fresh
  cargoship.engine.lock_heartbeat:
    run_id: "{{ connect_run_id }}"
"""

RETURN = r"""
keeper_pid:
  description: The keeper process on the control host.
  returned: always
  type: int
"""
