#!/usr/bin/python
# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: host_lock
short_description: The exclusive cargoship lock of one host
version_added: 0.1.0
description:
  - One lock file per host names its holder (user, control host, process, start time, run id).
  - The holder touches it every O(touch_interval) seconds while it lives; a lock untouched for longer
    than its holder's stale window is stale and may be taken over. The lock records the holder's
    O(stale_after) and O(touch_interval), so a taker judges it by the holder's window, never by its own
    (a lock of an older version, which records none, is judged by O(stale_after)). A fresh lock held by
    another run makes O(state=acquired) fail at once, naming the holder, without changing anything.
  - The lock is created atomically (hard link of a complete temporary file), so two runs racing
    for a free lock cannot both win.
author:
  - cargoship developers (@cargoship)
extends_documentation_fragment:
  - cargoship.engine._survey
  - cargoship.engine._attributes
  - cargoship.engine._attributes.no_diff
options:
  state:
    description:
      - V(acquired) takes the lock (or keeps it, if this run holds it).
      - V(released) removes it if this run holds it, or whoever holds it with O(force=true).
      - V(touched) refreshes its time if this run holds it.
    type: str
    required: true
    choices: [acquired, released, touched]
  run_id:
    description: Identifies this run; the lock belongs to the run that wrote it.
    type: str
    required: true
  holder:
    description: Who is taking the lock (user, control host, pid, started), written into it.
    type: dict
    default: {}
  path:
    description: The lock file.
    type: path
    default: /var/lib/cargoship/lock.json
  stale_after:
    description:
      - Seconds without a touch after which this run's lock is stale, recorded in the lock it takes. Also the
        window of a lock that records none. At least twice O(touch_interval), else O(state=acquired) fails.
    type: int
    default: 60
  touch_interval:
    description: Seconds between the holder's touches of its lock, recorded in the lock it takes.
    type: int
    default: 30
  force:
    description: With O(state=released), break the lock whoever holds it.
    type: bool
    default: false
  others:
    description:
      - With O(state=released), what to do about a lock another run holds (and O(force=false)).
      - V(fail) fails; V(keep) leaves it alone and succeeds without a change, for a run that releases
        what it may have taken after it stopped (another run's lock may be what stopped it).
    type: str
    default: fail
    choices: [fail, keep]
  reads:
    description:
      - Calls (C(module) and C(args), as host_survey takes them) answered on the host in the same round once
        O(state=acquired) holds the lock, in check mode; only calls of engine_info and host_info. Ignored in
        check mode and with the other states.
      - Their answers (RV(answers)) are the host's state under this run's lock, so a real run's later reads
        take them instead of going to the host again.
    type: list
    elements: dict
    default: []
  read_planned:
    description:
      - Handled by the action plugin. With O(state=acquired) in a real run, O(reads) becomes the reads the
        run's planned phases would make again on this host under the lock (the engine's state), up to the
        first phase that changes hosts, leaving out any that a hook of C(cargoship_hooks) runs before.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Take the lock
  cargoship.engine.host_lock:
    state: acquired
    run_id: "{{ cargoship_run_id }}"
    holder:
      user: "{{ lookup('ansible.builtin.env', 'USER') }}"
  become: true

- name: Take the lock and read the engine under it, in one round
  cargoship.engine.host_lock:
    state: acquired
    run_id: "{{ cargoship_run_id }}"
    reads:
      - module: engine_info
        args: {engine: k3s, node_role: agent}
  become: true
  register: lock_taken

- name: Break a lock on purpose
  cargoship.engine.host_lock:
    state: released
    run_id: manual
    force: true
  become: true
"""

RETURN = r"""
held_by:
  description: The holder recorded in the lock before this call, if any.
  returned: always
  type: dict
age:
  description: Seconds since the lock was last touched; null without a lock.
  returned: always
  type: float
stale:
  description: Whether an existing lock was stale.
  returned: always
  type: bool
took_over:
  description: Whether a stale lock of another run was taken over.
  returned: with state=acquired
  type: bool
held:
  description: In check mode, whether another run holds a fresh lock (a real run would fail).
  returned: with state=acquired, when held
  type: bool
locked_by:
  description: When O(state=acquired) fails because another run holds the lock, that run and its holder.
  returned: when another run holds the lock
  type: str
changes:
  description: What taking the lock does (or would run into), for the run report.
  returned: with state=acquired
  type: list
  elements: str
answers:
  description:
    - One per call of O(reads), in order, as host_survey returns them (C(module), C(args), C(result), C(phase)).
  returned: when the lock was taken or held with O(reads) in a real run
  type: list
  elements: dict
under_lock:
  description: Whether RV(answers) were made under this run's lock (a later read of the run may take them).
  returned: when the answers were made
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.cargoship.engine.plugins.module_utils._host_lock import MODULE_KWARGS, run
from ansible_collections.cargoship.engine.plugins.module_utils._outcome import finish


def main() -> None:
    finish(AnsibleModule(**MODULE_KWARGS), run)


if __name__ == "__main__":
    main()
