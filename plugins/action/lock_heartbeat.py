# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tempfile

from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase

from ansible_collections.cargoship.engine.plugins.plugin_utils import _lock_keeper

KEEPER = _lock_keeper.__file__


def touch_command(path: str, run_id: str, root: bool) -> str:
    """Touch the lock only while it is this run's: never revive a lock released or taken over."""
    script = f"grep -qF {shlex.quote(json.dumps({'run_id': run_id})[1:-1])} {shlex.quote(path)} && touch -c {shlex.quote(path)}"
    return ("" if root else "sudo -n ") + f"sh -c {shlex.quote(script)}"


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("run_id", "path", "interval"))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self._task.args
        path = args.get("path", "/var/lib/cargoship/lock.json")
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
        spool = os.path.join(tempfile.gettempdir(), f"cargoship-keeper-{run_pid}")
        os.makedirs(spool, mode=0o700, exist_ok=True)
        entry = os.path.join(spool, f"host-{task_vars['inventory_hostname']}.json")
        with open(entry + ".tmp", "w", encoding="utf-8") as handle:
            json.dump({"argv": argv}, handle)
        os.replace(entry + ".tmp", entry)
        result.update(changed=False, keeper_pid=self._ensure_keeper(spool, run_pid, int(args.get("interval", 30))))
        return result

    @staticmethod
    def _ensure_keeper(spool: str, run_pid: int, interval: int) -> int:
        pid_file = os.path.join(spool, "keeper.pid")
        try:
            fd = os.open(pid_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            with open(pid_file, encoding="ascii") as handle:
                return int(handle.read().strip() or 0)
        control = os.environ.get("CARGOSHIP_CLI_PID", "")
        keeper = subprocess.Popen(
            [sys.executable, KEEPER, spool, str(run_pid), str(interval), *([control] if control.isdigit() else [])],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )
        with os.fdopen(fd, "w", encoding="ascii") as handle:
            handle.write(str(keeper.pid))
        return keeper.pid
