# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import json
import os
import shlex

from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase

from ansible_collections.cargoship.engine.plugins.module_utils._engines import LOCK_PATH
from ansible_collections.cargoship.engine.plugins.plugin_utils import _lock_keeper


def touch_command(path: str, run_id: str, root: bool) -> str:
    """Touch the lock only while it is this run's: never revive a lock released or taken over (that exits
    with the keeper's NOT_OURS, so that it stops touching it)."""
    mark, quoted = shlex.quote(json.dumps({"run_id": run_id})[1:-1]), shlex.quote(path)
    # Gone (released): NOT_OURS, the keeper stops touching it. There but another run's: TAKEN, the keeper
    # stops the run, which must not go on without its lock.
    script = (
        f"if grep -qF {mark} {quoted}; then touch -c {quoted}; "
        f"elif [ -e {quoted} ]; then exit {_lock_keeper.TAKEN}; else exit {_lock_keeper.NOT_OURS}; fi"
    )
    return ("" if root else "sudo -n ") + f"sh -c {shlex.quote(script)}"


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("run_id", "path", "interval"))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self._task.args
        path = args.get("path", LOCK_PATH)
        connection = self._connection
        if connection.transport == "local":
            as_root = os.geteuid() == 0
        else:
            as_root = (self._play_context.remote_user or connection.get_option("remote_user")) == "root"
        command = touch_command(path, args["run_id"], root=as_root)
        if connection.transport == "local":
            argv = ["/bin/sh", "-c", command]
        elif connection.transport in ("ssh", "ansible.builtin.ssh"):
            if connection.get_option("password"):
                return {
                    **result,
                    "failed": True,
                    "msg": "the lock heartbeat needs key-based SSH (a password cannot be replayed by the keeper)",
                }
            connection.host = connection.get_option("host") or self._play_context.remote_addr
            argv = [
                to_text(a)
                for a in connection._build_command(
                    connection.get_option("ssh_executable"), "ssh", connection.host, command
                )
            ]
        else:
            return {
                **result,
                "failed": True,
                "msg": f"the lock heartbeat does not support the {connection.transport} connection",
            }

        # ansible-playbook forks the worker running this action: its parent is the run itself.
        run_pid = os.getppid()
        control = os.environ.get("CARGOSHIP_CLI_PID", "")
        try:
            spool = _lock_keeper.private_spool(run_pid)
            # Delegated (a controller outside --limit), the lock is the delegated host's.
            host = self._task.delegate_to or task_vars["inventory_hostname"]
            _lock_keeper.write_entry(spool, f"host-{host}.json", {"argv": argv})
            keeper_pid = _lock_keeper.ensure_keeper(
                spool, run_pid, int(args.get("interval", 30)), control if control.isdigit() else None
            )
            # For the cargoship command, which watches that the keeper lives as long as the run.
            _lock_keeper.advertise(keeper_pid, os.environ.get("CARGOSHIP_KEEPER_PIDFILE"))
        except _lock_keeper.UnsafeSpool as exc:
            return {**result, "failed": True, "msg": str(exc)}
        result.update(changed=False, keeper_pid=keeper_pid)
        return result
