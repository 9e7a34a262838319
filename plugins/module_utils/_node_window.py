# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A node's sync window, its steps named once: the state each step leaves the node in, in their order.

The node_sync role (roles/node_sync/tasks/main.yml) goes through them top to bottom: it opens the window
(``OPENED``), then drains (cluster_node), stops (engine_service), puts the new files in place
(engine_config), starts (engine_service), waits until a new kubelet is Ready (cluster_node), proves that the
engine loaded the new files, stamps and uncordons (engine_proof).
Each of those modules returns the state its step left the node in as ``node_state``; on a failure the
rollback (restore.yml) puts the previous files back (engine_config). plugin_utils/_node_progress.py follows
the states a run's results report, so that a node left part-way is named with what it had done.
"""

from __future__ import annotations

OPENED = "draining"  # the window opened: the node is about to be cordoned
DRAINED = "drained"
STOPPED = "stopped"
WRITTEN = "written"
STARTED = "started"
READY = "ready"
UNCORDONED = "uncordoned"  # the window closed: the node is schedulable again
RESTORED = "restored"

# The steps in their order (the rollback's last).
STEPS = (OPENED, DRAINED, STOPPED, WRITTEN, STARTED, READY, UNCORDONED, RESTORED)

# What a node is like once each step has finished.
DONE = {
    DRAINED: "cordoned and drained by this run",
    STOPPED: "engine stopped",
    WRITTEN: "new files in place (the previous ones kept in /var/lib/cargoship/backups)",
    STARTED: "engine started",
    READY: "node Ready",
    RESTORED: "previous files put back",
}

# What a node was doing when its last finished step was this one.
NEXT = {
    OPENED: "the drain (restarted in place: the engine stop)",
    DRAINED: "the engine stop",
    STOPPED: "writing the new configuration",
    WRITTEN: "the engine start",
    STARTED: "the wait for Ready",
    READY: "the proof that the engine loaded the new files, and the uncordon",
    RESTORED: "the restart on the previous configuration",
}
