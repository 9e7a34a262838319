# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""cluster_node's states, options and the one call that runs a state: shared by its action plugin, which
runs it in the task's own process on the control host, and its module (the same code as a module, for its
documentation and tests). A state's handler is in _kube_nodes.py."""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass

from ansible_collections.cargoship.engine.plugins.module_utils._kube_access import (
    ARGUMENT_SPEC,
    LibraryMissing,
    api_client,
    describe,
)
from ansible_collections.cargoship.engine.plugins.module_utils._kube_nodes import (
    NODE_STATES,
    all_ready,
    api_message,
    check_known,
    check_safe_to_stop,
    drained,
    drains_assessed,
    labeled,
    one_ready,
    release,
    uncordoned,
)
from ansible_collections.cargoship.engine.plugins.module_utils._kube_rest import ApiException, ApiUnavailable, KubeApi
from ansible_collections.cargoship.engine.plugins.module_utils._outcome import Failed


@dataclass(frozen=True)
class State:
    """One state on one kind of target: its handler and the options it reads (besides the target, the
    state and the API connection). An option the state does not read, given anyway, is refused."""

    handler: Callable
    options: frozenset = frozenset()
    check_mode_only: bool = False


# Options of the drain (pods_to_evict and drain in module_utils/_kube_nodes.py).
DRAIN = frozenset(
    {
        "timeout",
        "retry_delay",
        "ignore_daemonsets",
        "delete_emptydir_data",
        "force",
        "owner",
        "kubelet_down",
        "fresh_within",
    }
)
# Options of the check that the cluster can lose a controller.
SAFE_TO_STOP = frozenset({"timeout", "fresh_within", "api_port", "allow_quorum_loss"})
STATES = {
    ("known", "node_of"): State(check_known),
    ("safe_to_stop", "name"): State(check_safe_to_stop, SAFE_TO_STOP),
    ("drained", "name"): State(drained, DRAIN | SAFE_TO_STOP | {"only_if_safe_to_stop"}),
    ("drained", "names"): State(drains_assessed, DRAIN, check_mode_only=True),
    ("uncordoned", "name"): State(uncordoned, frozenset({"owner"})),
    ("ready", "name"): State(one_ready, frozenset({"timeout", "restarted_after", "uncordon", "owner"})),
    ("ready", "names"): State(all_ready, frozenset({"timeout"})),
    ("labeled", "name"): State(labeled, frozenset({"labels"})),
    ("released", "names"): State(release, frozenset({"fresh_within"})),
}
# The states that wait (for pods to go, for Ready, for a learner): their API calls retry until their timeout.
WAITS = frozenset({"drained", "ready", "safe_to_stop"})
TARGETS = ("name", "names", "node_of")
OPTIONS = {
    "timeout": {"type": "int", "default": 300},
    "retry_delay": {"type": "int", "default": 5},
    "ignore_daemonsets": {"type": "bool", "default": True},
    "delete_emptydir_data": {"type": "bool", "default": True},
    "force": {"type": "bool", "default": False},
    "owner": {"type": "str"},
    "labels": {"type": "dict", "default": {}},
    "restarted_after": {"type": "str"},
    "fresh_within": {"type": "int", "default": 45},
    "kubelet_down": {"type": "str"},
    "api_port": {"type": "int", "default": 6443},
    "allow_quorum_loss": {"type": "bool", "default": False},
    "uncordon": {"type": "bool", "default": False},
    "only_if_safe_to_stop": {"type": "bool", "default": False},
}


def state_for(params: dict, check_mode: bool) -> tuple[State | None, str]:
    """The state's entry for the target given, or None and why not (a wrong target, an option it does
    not read)."""
    target = "node_of" if params["node_of"] else ("names" if params["names"] is not None else "name")
    entry = STATES.get((params["state"], target))
    if entry is None or (entry.check_mode_only and not check_mode):
        valid = [
            t for (state, t), e in STATES.items() if state == params["state"] and (check_mode or not e.check_mode_only)
        ]
        return None, f"state={params['state']} works on {' or '.join(valid)}, not {target}"
    unread = sorted(
        name for name, spec in OPTIONS.items() if params[name] != spec.get("default") and name not in entry.options
    )
    if unread:
        return None, f"state={params['state']} does not use {', '.join(unread)}"
    return entry, target


ARGUMENTS = {
    "name": {"type": "str"},
    "names": {"type": "list", "elements": "str"},
    "state": {"type": "str", "required": True, "choices": sorted({state for state, _target in STATES})},
    "node_of": {"type": "dict"},
    **ARGUMENT_SPEC,
    **OPTIONS,
}


def subject(params: dict, target: str) -> str:
    """What a state was asked of, in words: node w1, nodes w1, w2, the hosts' nodes."""
    if target == "name":
        return f"node {params['name']}"
    if target == "names":
        return "nodes " + ", ".join(str(name) for name in params.get("names") or [])
    return "the hosts' nodes"


def run_state(module, missing_library: Callable[[str], str]) -> dict:
    """The state asked for, on its target; its result. ``module``: ``params`` (validated against ARGUMENTS),
    ``check_mode`` and ``fail_json`` (which must not return). ``missing_library`` words the message for a
    missing Python package."""
    p = module.params
    entry, target = state_for(p, module.check_mode)
    if entry is None:
        module.fail_json(msg=target)
    handler = entry.handler
    try:
        api = KubeApi(api_client(p))
        if p["state"] in WAITS and not module.check_mode:
            # A wait's calls ride through "not yet" answers for as long as the wait itself may take.
            api.deadline = time.monotonic() + p["timeout"]
        result = handler(api, module)
    except Failed:
        # The state's own failure (fail_json raises it where the state runs in process, plugin_utils/_in_process.py):
        # it says what is wrong itself, and is not an API that cannot be reached.
        raise
    except ApiException as exc:
        module.fail_json(msg=f"Kubernetes API refused {p['state']} of {subject(p, target)}: {api_message(exc)}")
    except ApiUnavailable as exc:
        module.fail_json(
            msg=f"cannot reach the Kubernetes API with {describe(p)} ({p['state']} of {subject(p, target)}): {exc}"
        )
    except LibraryMissing:
        module.fail_json(msg=missing_library("kubernetes"), exception=traceback.format_exc())
    except Exception as exc:  # the client raises many kinds for an unusable kubeconfig or API
        module.fail_json(
            msg=f"cannot reach the Kubernetes API with {describe(p)}: {exc}", exception=traceback.format_exc()
        )
    if (
        not module.check_mode
        and p["state"] in NODE_STATES
        and target == "name"
        and (p["state"] != "ready" or result["ready"])
    ):
        result["node_state"] = NODE_STATES["uncordoned" if result.get("uncordoned") else p["state"]]
    result.pop("uncordoned", None)
    return result
