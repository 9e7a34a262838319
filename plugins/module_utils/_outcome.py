# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""How a backend's work ends: it returns its result, or raises Failed. Only the module's own main
turns that into exit_json or fail_json, so other callers (host_survey runs several backends in one
process) take the result as it is, without anything ending the process."""

from __future__ import annotations


class Failed(Exception):
    """The work failed: its message, and what the module returns beside it."""

    def __init__(self, msg: str, **result):
        super().__init__(msg)
        self.msg = msg
        self.result = result

    def as_result(self) -> dict:
        return {**self.result, "failed": True, "msg": self.msg}


def finish(module, work) -> None:
    """Run ``work(module)`` and end the module with its result."""
    try:
        result = work(module)
    except Failed as failure:
        module.fail_json(msg=failure.msg, **failure.result)
    module.exit_json(**result)
