# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""host_lock: the answer of a host_survey given as ``survey``, else the module on the host. Before a
release, the run's lock keeper stops touching the host: a lock another run takes after it is theirs."""

from __future__ import annotations

import os

from ansible_collections.cargoship.engine.plugins.plugin_utils import _lock_keeper
from ansible_collections.cargoship.engine.plugins.plugin_utils._reads import lock_calls
from ansible_collections.cargoship.engine.plugins.plugin_utils._survey import SurveyAnsweredAction


class ActionModule(SurveyAnsweredAction):
    MODULE = "host_lock"

    def task_args(self, task_vars: dict) -> dict:
        """With ``read_planned``, a real run's lock takes the reads it would make again under it (_reads.py)."""
        args = dict(self._task.args)
        planned = args.pop("read_planned", False)
        if planned and args.get("state") == "acquired" and not self._play_context.check_mode:
            selected = self._templar.template(task_vars.get("cargoship_phase") or "")
            reads = lock_calls(self._templar, task_vars, selected or None)
            if reads:
                args["reads"] = reads
        return args

    def run(self, tmp=None, task_vars=None):
        if self._task.args.get("state") == "released" and not self._play_context.check_mode:
            # ansible-playbook forks the worker running this action: its parent is the run (as for
            # lock_heartbeat, which registered the host under the same name).
            host = self._task.delegate_to or (task_vars or {}).get("inventory_hostname")
            if host:
                _lock_keeper.unregister(os.getppid(), host)
        return super().run(tmp, task_vars)
