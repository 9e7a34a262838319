#!/usr/bin/python
# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: engine_service
short_description: Stop or start the engine service of a k3s or RKE2 node, never waiting without bound
version_added: 0.1.0
description:
  - The engines' own units have no start timeout (C(TimeoutStartSec=0)) and restart for ever
    (C(Restart=always)). C(systemctl start) of an engine that never signals READY (a malformed
    C(registries.yaml), an RKE2 apiserver that crash-loops) blocks for ever, and a crash-looping engine
    is C(activating) or C(auto-restart), never C(failed). So this module asks systemd without waiting
    (C(--no-block)) and watches the unit itself, up to O(timeout).
  - With O(state=started), the unit must become C(active) and then stay active, with no restart, for
    O(settle) seconds. An engine that is still starting, restarting or failed at O(timeout) fails the
    task, naming its state.
  - With O(state=stopped), the unit must be C(inactive) or C(failed) within O(timeout). The host's
    clock at that moment is returned as RV(stopped_at). A kubelet Lease renewed after it was renewed
    by a kubelet started after the stop (see M(cargoship.engine.cluster_node)'s O(cargoship.engine.cluster_node#module:restarted_after)).
  - V(restarted) is V(stopped) then V(started). V(started) of a unit that is not active (stopped,
    failed, crash-looping, stuck starting) returns RV(stopped_at) too, the moment before it asked for the start.
author:
  - cargoship developers (@cargoship)
extends_documentation_fragment:
  - cargoship.engine._attributes
  - cargoship.engine._attributes.no_diff
options:
  name:
    description: The engine's unit, e.g. V(k3s-agent) or V(rke2-server).
    type: str
    required: true
  state:
    description: V(started), V(stopped) or V(restarted), as described above.
    type: str
    required: true
    choices: [started, stopped, restarted]
  timeout:
    description: Seconds the unit may take to reach O(state) (for V(started), settling included).
    type: int
    default: 300
  settle:
    description: With O(state=started), seconds the unit must stay active without a restart.
    type: int
    default: 10
  lock_run_id:
    description:
      - Go on only while the cargoship host lock (M(cargoship.engine.host_lock)) is held by this run id,
        checked (and refreshed) in the same call, just before the unit is touched; otherwise fail, changing
        nothing. A run that lost its lock while it drained the node stops before the engine does.
    type: str
"""

EXAMPLES = r"""
- name: Stop the engine
  cargoship.engine.engine_service:
    name: k3s-agent
    state: stopped
  become: true
  register: stopped

- name: Start the engine; fail if it is not running steadily within 5 minutes
  cargoship.engine.engine_service:
    name: k3s-agent
    state: started
    timeout: 300
    settle: 10
  become: true
"""

RETURN = r"""
state:
  description: The unit's state at the end, C(ActiveState), with C(SubState) where it is not active (e.g. V(activating (auto-restart))).
  returned: always
  type: str
restarts:
  description: How often systemd has restarted the unit (C(NRestarts)).
  returned: always
  type: int
stopped_at:
  description:
    - The host's clock when the engine was seen stopped (or, for a start of a unit that was not active,
      just before the start), RFC 3339 with microseconds, UTC.
  returned: when the engine was stopped or not running
  type: str
node_state:
  description:
    - What the node is like now, for the report and the command that follow a node's sync (V(stopped)
      or V(started)).
  returned: when the engine was stopped or started (not in check mode)
  type: str
changes:
  description: What was done to the unit, in the report's words.
  returned: when the unit was stopped, started or restarted (not in check mode)
  type: list
  elements: str
  sample: [stop k3s-agent]
"""

import datetime
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.cargoship.engine.plugins.module_utils import _node_window as window
from ansible_collections.cargoship.engine.plugins.module_utils._engines import LOCK_PATH
from ansible_collections.cargoship.engine.plugins.module_utils._host_lock import touch_if_held
from ansible_collections.cargoship.engine.plugins.module_utils._systemd import unit_state

# systemctl show on the host itself: cheap enough to look often, so that a start is seen when it happens.
POLL_SECONDS = 0.2
# Once the unit is active, the settle only watches for it to stop or restart (systemd counts every
# restart in NRestarts, so one between two looks is seen): a look a second is enough.
SETTLE_POLL_SECONDS = 1.0
STOPPED = ("inactive", "failed")


class Unit:
    def __init__(self, module: AnsibleModule, name: str):
        self.module, self.name = module, name
        self.systemctl = module.get_bin_path("systemctl", required=True)

    def show(self) -> dict:
        rc, out, err = self.module.run_command(
            [self.systemctl, "show", "--property=LoadState,ActiveState,SubState,NRestarts", f"{self.name}.service"]
        )
        props = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
        if rc != 0 or props.get("LoadState") != "loaded":
            self.module.fail_json(
                msg=f"no unit {self.name} on this host ({(err or props.get('LoadState', '')).strip()})"
            )
        props["NRestarts"] = int(props.get("NRestarts") or 0)
        return props

    def ask(self, *verb: str) -> None:
        rc, _out, err = self.module.run_command([self.systemctl, *verb, "--no-block", f"{self.name}.service"])
        if rc != 0:
            self.module.fail_json(msg=f"systemctl {' '.join(verb)} {self.name} failed: {err.strip()}")


def now_rfc3339() -> str:
    # timezone.utc, not datetime.UTC: this runs on the hosts, whose Python may be older than 3.11.
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")  # noqa: UP017


def wait_stopped(module: AnsibleModule, unit: Unit, props: dict) -> dict:
    unit.ask("stop")
    deadline = time.monotonic() + module.params["timeout"]
    while props["ActiveState"] not in STOPPED:
        if time.monotonic() > deadline:
            module.fail_json(
                msg=f"{unit.name} did not stop within {module.params['timeout']}s: it is {unit_state(props)}",
                state=unit_state(props),
                restarts=props["NRestarts"],
            )
        time.sleep(POLL_SECONDS)
        props = unit.show()
    return props


def wait_started(module: AnsibleModule, unit: Unit, result: dict) -> None:
    """Start the unit and wait until it has been active, without a restart, for the settle time."""
    p = module.params
    module.run_command([unit.systemctl, "reset-failed", f"{unit.name}.service"])
    unit.ask("start")
    deadline = time.monotonic() + p["timeout"]
    steady_since, restarts = None, None
    while True:
        props = unit.show()
        if unit_state(props) == "active" and props["NRestarts"] == restarts:
            if time.monotonic() - steady_since >= p["settle"]:
                module.exit_json(
                    **result, changed=True, state="active", restarts=props["NRestarts"], node_state=window.STARTED
                )
        elif unit_state(props) == "active":
            steady_since, restarts = time.monotonic(), props["NRestarts"]  # (re)started: the settle begins
        else:
            steady_since, restarts = None, None
        if time.monotonic() > deadline:
            module.fail_json(
                msg=f"{unit.name} did not come up and stay up within {p['timeout']}s: it is {unit_state(props)}, "
                f"restarted {props['NRestarts']} times by systemd (see `journalctl -u {unit.name}` on the host)",
                **result,
                state=unit_state(props),
                restarts=props["NRestarts"],
            )
        if steady_since is None:
            time.sleep(POLL_SECONDS)
        else:  # settling: look again once a second, and when the settle time is up
            settled_in = p["settle"] - (time.monotonic() - steady_since)
            time.sleep(max(POLL_SECONDS, min(SETTLE_POLL_SECONDS, settled_in)))


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "name": {"type": "str", "required": True},
            "state": {"type": "str", "required": True, "choices": ["started", "stopped", "restarted"]},
            "timeout": {"type": "int", "default": 300},
            "settle": {"type": "int", "default": 10},
            "lock_run_id": {"type": "str"},
        },
        supports_check_mode=True,
    )
    if module.params["lock_run_id"]:
        refused = touch_if_held(LOCK_PATH, module.params["lock_run_id"], module.check_mode)
        if refused:
            module.fail_json(msg=f"{refused}: {module.params['name']} was left as it was")
    unit = Unit(module, module.params["name"])
    props = unit.show()
    state, running = module.params["state"], unit_state(props) == "active"
    if state == "started" and running:
        module.exit_json(changed=False, state="active", restarts=props["NRestarts"], node_state=window.STARTED)
    if state == "stopped" and props["ActiveState"] in STOPPED:
        module.exit_json(
            changed=False,
            state=unit_state(props),
            restarts=props["NRestarts"],
            stopped_at=now_rfc3339(),
            node_state=window.STOPPED,
        )
    if module.check_mode:
        module.exit_json(changed=True, state=unit_state(props), restarts=props["NRestarts"])
    if state != "started" and props["ActiveState"] not in STOPPED:
        props = wait_stopped(module, unit, props)
    # Any kubelet Lease renewal from now on is by a kubelet that this start (or a later one) started.
    result = {"stopped_at": now_rfc3339()}
    if state == "stopped":
        module.exit_json(
            **result,
            changed=True,
            changes=[f"stop {unit.name}"],
            state=unit_state(props),
            restarts=props["NRestarts"],
            node_state=window.STOPPED,
        )
    result["changes"] = [f"{'restart' if state == 'restarted' and running else 'start'} {unit.name}"]
    wait_started(module, unit, result)


if __name__ == "__main__":
    main()
