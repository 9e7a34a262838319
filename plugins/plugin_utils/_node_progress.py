# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where each node is in its sync window, from the data the window's steps return.

The node_sync role opens a node's window by setting the fact ``node_sync_state: draining``; each step
after it returns ``node_state`` (cluster_node: drained, ready, uncordoned; engine_service: stopped,
started; engine_config: written, restored). A node whose window opened and was never closed by an
uncordon was left part-way: the report callback lists it (``nodes_left_mid_sync``), and the
``cargoship`` command, which follows the same results as events, puts such nodes back after Ctrl-C.
Nothing here reads a task's name or a message.
"""

from __future__ import annotations

from ansible_collections.cargoship.engine.plugins.module_utils._node_window import DONE, NEXT, OPENED
from ansible_collections.cargoship.engine.plugins.module_utils._node_window import UNCORDONED as CLOSED


def state_of(result: dict) -> str | None:
    """The node state a task result reports, if it reports one."""
    if not isinstance(result, dict):
        return None
    state = result.get("node_state")
    if state is None:
        state = (result.get("ansible_facts") or {}).get("node_sync_state")
    return state if state in NEXT or state == CLOSED else None


class NodeProgress:
    """The nodes whose window is open, and the states each has gone through since it opened."""

    def __init__(self) -> None:
        self.steps: dict[str, list[str]] = {}

    def feed(self, host: str, result: dict) -> None:
        """One task result (ok) of ``host``."""
        state = state_of(result)
        if state == OPENED:
            self.steps[host] = [OPENED]
        elif state == CLOSED:
            self.steps.pop(host, None)
        elif state is not None and host in self.steps:
            self.steps[host].append(state)

    @property
    def in_flight(self) -> list[str]:
        return sorted(self.steps)

    def left_mid_sync(self, run_id: str, inventory: str) -> dict[str, dict]:
        """Each node left part-way: what it was doing, what it had done, and how to finish it
        (``inventory``: the ``-i`` arguments of the command to print)."""
        left = {}
        for node, steps in sorted(self.steps.items()):
            done = [DONE[s] for s in steps if s in DONE]
            left[node] = {
                "lost_during": NEXT[steps[-1]],
                "state": "Done before: " + ("; ".join(done) if done else "nothing (the drain had just started)"),
                "resume": (
                    "It stays cordoned. After repair, rerun engine-config-sync: it finishes the node and gives it "
                    "back. To put it back as it was instead: "
                    f"`ansible-playbook {inventory} cargoship.engine.recover -e cargoship_run_id={run_id} --limit {node}`"
                ),
            }
        return left
