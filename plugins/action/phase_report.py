# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

from ansible.plugins.action import ActionBase


class ActionModule(ActionBase):
    """Controller-side only: the report callback reads ``cargoship_phase`` from the result."""

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("phase", "mode", "reason", "changes"))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self._task.args
        changes = list(args.get("changes") or [])
        result["cargoship_phase"] = {
            "phase": args["phase"],
            "mode": args.get("mode"),
            "reason": args.get("reason"),
            "changes": changes,
        }
        result["changed"] = bool(changes)
        return result
