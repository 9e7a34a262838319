# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""cluster_node on the control host, in the task's own process.

As a module, each call was a fresh Python on the control host that unpacked Ansible's module code and compiled
it again: about a quarter of a second of CPU, three or four times per node and run (a drain, a Ready wait, a
safe-to-stop check), on a control host that drives hundreds of nodes. The state runs here with the same code
(module_utils/_cluster_node.py), its options checked against the module's own argument spec."""

from __future__ import annotations

from ansible_collections.cargoship.engine.plugins.plugin_utils._in_process import InProcessAction


class ActionModule(InProcessAction):
    MODULE = "cluster_node"
