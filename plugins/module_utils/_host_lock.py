# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The exclusive cargoship lock of one host.

The logic of the host_lock module, here so that host_survey runs the same code in its one round."""

from __future__ import annotations

import json
import os
import tempfile
import time

from ansible_collections.cargoship.engine.plugins.module_utils._engines import LOCK_PATH
from ansible_collections.cargoship.engine.plugins.module_utils._outcome import Failed


def read_lock(path: str) -> tuple[dict | None, float | None]:
    try:
        age = time.time() - os.stat(path).st_mtime
        with open(path, encoding="utf-8") as handle:
            return json.load(handle), age
    except FileNotFoundError:
        return None, None
    except ValueError:
        # A lock file that is not JSON still counts as held; it carries no holder to name.
        return {"run_id": "unknown", "holder": {}}, time.time() - os.stat(path).st_mtime


def stale_window(lock: dict, own: int) -> int:
    """How long the holder of ``lock`` lets it go untouched before it counts as stale: the window it
    recorded (its keeper touches it well within that), else ``own`` (a lock of an older cargoship)."""
    window = lock.get("stale_after")
    return window if isinstance(window, int) and not isinstance(window, bool) and window > 0 else own


def window_problem(stale_after: int, touch_interval: int) -> str | None:
    """Why a stale window and touch interval do not go together, else None: one late touch must never let
    a live run's lock go stale."""
    if touch_interval < 1:
        return f"the lock's touch interval must be 1 s or more, got {touch_interval}"
    if stale_after < 2 * touch_interval:
        return (
            f"the lock's stale window ({stale_after} s) must be at least twice its touch interval "
            f"({touch_interval} s), so that one late touch does not let a live run's lock go stale"
        )
    return None


def describe(lock: dict) -> str:
    holder = lock.get("holder") or {}
    parts = [f"{k}={holder[k]}" for k in ("user", "control_host", "pid", "started") if holder.get(k)]
    return f"run {lock.get('run_id')} ({', '.join(parts) or 'no holder recorded'})"


def not_held(lock: dict | None) -> str:
    """Why a run may not go on: the lock is no longer its own."""
    return f"cannot touch a lock this run does not hold (held by {describe(lock) if lock else 'nobody'})"


# The reads a lock's round may answer: none takes credentials (plugin_utils/_reads.py chooses among them).
READ_UNDER_LOCK = ("engine_info", "host_info")


def touch_if_held(path: str, run_id: str, check_mode: bool) -> str | None:
    """Refresh the lock if ``run_id`` holds it; otherwise why not (for a step that must not go on)."""
    lock, _age = read_lock(path)
    if lock is None or lock.get("run_id") != run_id:
        return not_held(lock)
    if not check_mode:
        os.utime(path)
    return None


def write_new(path: str, content: dict) -> bool:
    """Create the lock only if absent; False when another run created it first."""
    directory = os.path.dirname(path)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".lock-", dir=directory)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(content, handle)
    os.chmod(tmp, 0o600)
    try:
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    finally:
        os.unlink(tmp)


# What AnsibleModule is given: the module's arguments and their rules.
MODULE_KWARGS = {
    "argument_spec": {
        # Taken by the action plugin (an answer of host_survey); the module never sees it.
        "survey": {"type": "dict"},
        "state": {"type": "str", "required": True, "choices": ["acquired", "released", "touched"]},
        "run_id": {"type": "str", "required": True},
        "holder": {"type": "dict", "default": {}},
        "path": {"type": "path", "default": LOCK_PATH},
        "stale_after": {"type": "int", "default": 60},
        "touch_interval": {"type": "int", "default": 30},
        "force": {"type": "bool", "default": False},
        "others": {"type": "str", "default": "fail", "choices": ["fail", "keep"]},
        # Taken by the action plugin (which renders the reads the module gets); the module never sees it.
        "read_planned": {"type": "bool", "default": False},
        "reads": {"type": "list", "elements": "dict", "default": []},
    },
    "supports_check_mode": True,
}


def run(module) -> dict:
    """The module's work: its result, or Failed. A lock taken (or already held) in a real run answers the
    ``reads`` in the same round, under it: host_survey's calls, in check mode (module_utils/_survey.py)."""
    reads = module.params.get("reads")
    unknown = sorted({str(call.get("module")) for call in reads or []} - set(READ_UNDER_LOCK))
    if unknown:
        raise Failed(f"host_lock reads calls of {', '.join(READ_UNDER_LOCK)}, not {', '.join(unknown)}")
    result = _lock(module)
    if reads and module.params["state"] == "acquired" and not module.check_mode:
        # Imported only here: the other calls of this module need none of the readers' code.
        from ansible_collections.cargoship.engine.plugins.module_utils._survey import run_calls

        # Made under this run's lock: they hold in this real run (plugin_utils/_survey.py).
        result.update(answers=run_calls(module, reads, []), under_lock=True)
    return result


def _lock(module) -> dict:
    p = module.params
    if p["state"] == "acquired":
        problem = window_problem(p["stale_after"], p["touch_interval"])
        if problem:
            raise Failed(problem)
    lock, age = read_lock(p["path"])
    ours = lock is not None and lock.get("run_id") == p["run_id"]
    # Judged by the holder's own window: a taker with a shorter one must not break a live run's lock.
    window = stale_window(lock or {}, p["stale_after"])
    stale = lock is not None and age is not None and age > window
    result = {"changed": False, "held_by": lock, "age": age, "stale": stale}

    if p["state"] == "acquired":
        if ours:
            return dict(**result, took_over=False, changes=[])
        if lock is not None and not stale and module.check_mode:
            # An assessment: report what a real run would run into, without failing the dry run.
            return dict(
                **result, held=True, changes=[f"would fail: locked by {describe(lock)}, touched {age:.0f}s ago"]
            )
        if lock is not None and not stale:
            raise Failed(
                f"locked by {describe(lock)}, touched {age:.0f}s ago; it goes stale after {window}s untouched "
                "(or break it with `cargoship unlock`)",
                held=True,
                locked_by=describe(lock),
                **result,
            )
        result.update(changed=True, took_over=lock is not None)
        result["changes"] = ["take the lock" + (f" (over a stale one of {describe(lock)})" if lock is not None else "")]
        if module.check_mode:
            return result
        content = {
            "run_id": p["run_id"],
            "holder": p["holder"],
            "stale_after": p["stale_after"],
            "touch_interval": p["touch_interval"],
        }
        if lock is not None:
            # Stale: move it aside atomically, then compete for the free lock like everyone else.
            aside = f"{p['path']}.stale-{os.getpid()}"
            try:
                os.rename(p["path"], aside)
            except FileNotFoundError:
                aside = None
            if aside:
                moved, _age = read_lock(aside)
                if (moved or {}).get("run_id") != lock.get("run_id"):
                    # Another run took over between our look and our move: give its lock back.
                    os.link(aside, p["path"])
                    os.unlink(aside)
                    raise Failed(
                        f"locked by {describe(moved or {})}, which took it a moment ago",
                        held=True,
                        locked_by=describe(moved or {}),
                        **result,
                    )
                os.unlink(aside)
        if not write_new(p["path"], content):
            winner, _age = read_lock(p["path"])
            raise Failed(
                f"locked by {describe(winner or {})}, which took it a moment ago",
                held=True,
                locked_by=describe(winner or {}),
                **result,
            )
        return result

    if p["state"] == "touched":
        if not ours:
            raise Failed(not_held(lock), **result)
        if not module.check_mode:
            os.utime(p["path"])
        return result

    # released
    if lock is None:
        return result
    if not ours and not p["force"] and p["others"] == "keep":
        return dict(msg=f"left the lock of {describe(lock)} alone", **result)
    if not ours and not p["force"]:
        raise Failed(f"not releasing a lock held by {describe(lock)}; use force to break it", **result)
    result["changed"] = True
    if not module.check_mode:
        os.unlink(p["path"])
    return result
