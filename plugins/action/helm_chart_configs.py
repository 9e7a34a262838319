# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""helm_chart_configs on the control host, in the task's own process (once per real run, and in every dry run's
assessment of the controllers' play): the same code as the module (module_utils/_helm_chart_configs.py), its
options checked against the module's own argument spec, without a fresh Python that unpacks and compiles
Ansible's module code for the call (plugin_utils/_in_process.py)."""

from __future__ import annotations

from ansible_collections.cargoship.engine.plugins.plugin_utils._in_process import InProcessAction


class ActionModule(InProcessAction):
    MODULE = "helm_chart_configs"
