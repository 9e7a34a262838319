# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What cargoship does to nodes through the Kubernetes API, as kubectl would: drain (cordon, evict with
the disruption budgets' consent, wait for the pods to go), uncordon, wait for Ready from a kubelet that
started after a stop, label, give back nodes a lost run left cordoned, and the read-only checks (every
host a node, a controller safe to stop). One function per (state, what it works on), each returning the
cluster_node module's result.

Each takes the API (``_kube_rest.KubeApi``: the typed client's calls, by their names) and ``module``:
anything with ``params`` (the module's options), ``check_mode`` and ``fail_json`` (which must not
return). Runs on the control host.
"""

from __future__ import annotations

import datetime
import json
import time

from ansible_collections.cargoship.engine.plugins.module_utils._kube_rest import (
    ApiException,
    ApiUnavailable,
    parse_time,
)
from ansible_collections.cargoship.engine.plugins.module_utils._node_window import DRAINED, READY, UNCORDONED

CORDONED_BY = "cargoship.io/cordoned-by"
CONTROL_PLANE = "node-role.kubernetes.io/control-plane"
ETCD_ROLE = "node-role.kubernetes.io/etcd"
UNCORDON = {"spec": {"unschedulable": None}, "metadata": {"annotations": {CORDONED_BY: None}}}
# The node_state a step of a node's sync returns (module_utils/_node_window.py names them).
NODE_STATES = {"drained": DRAINED, "ready": READY, "uncordoned": UNCORDONED}


def is_ready(node) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in (node.status.conditions or []))


def pause(began: float) -> None:
    """The wait between two looks at something that is about to change: short at first, so that an
    answer already there is seen at once, then longer (0.2 s growing to 1 s over 8 s), so that a long
    wait does not load the API server."""
    time.sleep(min(1.0, 0.2 + (time.monotonic() - began) / 10))


def back_since(core, name: str, since: datetime.datetime) -> tuple[bool, str]:
    """Whether a kubelet started after ``since`` runs and reports the node Ready; if not, why not."""
    node = core.read_node(name)
    ready = next((c for c in node.status.conditions or [] if c.type == "Ready"), None)
    renewed = lease_renewed(core, name)
    if renewed is None or renewed <= since:
        return False, (
            "its kubelet has not renewed its Lease since the engine was stopped"
            + (" (the Ready=True the node shows is from before)" if is_ready(node) else "")
        )
    # A status is posted with a whole-second heartbeat time: one from the new kubelet is never earlier
    # than the second of the stop.
    posted = ready.last_heartbeat_time if ready else None
    if posted is None or posted < since.replace(microsecond=0):
        return False, "its kubelet runs but has not posted the node's status since the engine was stopped"
    if ready.status != "True":
        return False, f"its kubelet reports Ready={ready.status}: {ready.reason or ''} {ready.message or ''}".strip()
    return True, "Ready, reported by a kubelet started after the engine was stopped"


def selector_matches(selector, labels: dict) -> bool:
    """Whether a PodDisruptionBudget's label selector picks a pod (policy/v1: an empty selector picks
    every pod of the budget's namespace, a missing one none)."""
    if selector is None:
        return False
    if any(labels.get(key) != value for key, value in (selector.match_labels or {}).items()):
        return False
    for requirement in selector.match_expressions or []:
        present, values = requirement.key in labels, requirement.values or []
        matched = {
            "In": present and labels.get(requirement.key) in values,
            "NotIn": not present or labels.get(requirement.key) not in values,
            "Exists": present,
            "DoesNotExist": not present,
        }.get(requirement.operator, False)
        if not matched:
            return False
    return True


def pods_to_evict(core, module, name: str, listed: dict | None = None) -> tuple[list, list[str]]:
    """The pods a drain evicts, as ``kubectl drain --ignore-daemonsets --delete-emptydir-data`` picks
    them, and why the drain cannot go ahead: pods without a controller, which nothing would recreate
    (unless O(force)), and pods more than one PodDisruptionBudget covers, which the API never evicts.
    ``listed``: the pods by node and the budgets, listed once for many nodes (see drains_assessed)."""
    p = module.params
    if listed is not None:
        pods = listed["pods"].get(name, [])
    else:
        pods = core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={name}").items
    chosen, orphans = [], []
    for pod in pods:
        annotations = pod.metadata.annotations or {}
        if "kubernetes.io/config.mirror" in annotations:
            continue  # static pods belong to the kubelet
        owners = pod.metadata.owner_references or []
        if any(o.kind == "DaemonSet" and o.controller for o in owners):
            if p["ignore_daemonsets"]:
                continue
            module.fail_json(
                msg=f"pod {pod.metadata.namespace}/{pod.metadata.name} belongs to a DaemonSet; set ignore_daemonsets to drain"
            )
        if pod.status and pod.status.phase in ("Succeeded", "Failed"):
            continue
        volumes = (pod.spec.volumes if pod.spec else None) or []
        if any(v.empty_dir is not None for v in volumes) and not p["delete_emptydir_data"]:
            module.fail_json(
                msg=f"pod {pod.metadata.namespace}/{pod.metadata.name} uses emptyDir data; set delete_emptydir_data to drain"
            )
        if not any(o.controller for o in owners) and not p["force"]:
            orphans.append(f"{pod.metadata.namespace}/{pod.metadata.name}")
            continue
        chosen.append(pod)
    refusals = []
    if orphans:
        refusals.append(
            f"{', '.join(orphans)} {'has' if len(orphans) == 1 else 'have'} no controller and would be gone for good "
            "(set cargoship_drain_force: true to delete them anyway)"
        )
    if chosen:
        if listed is not None:
            budgets = listed["budgets"]
        else:
            budgets = core.list_pod_disruption_budget_for_all_namespaces().items
        for pod in chosen:
            covering = [
                f"{b.metadata.namespace}/{b.metadata.name}"
                for b in budgets
                if b.metadata.namespace == pod.metadata.namespace
                and selector_matches(b.spec.selector, pod.metadata.labels or {})
            ]
            if len(covering) > 1:
                refusals.append(
                    f"{pod.metadata.namespace}/{pod.metadata.name} is covered by more than one PodDisruptionBudget "
                    f"({', '.join(covering)}), which the API refuses to evict (leave one budget per pod)"
                )
    return chosen, refusals


def api_message(exc: ApiException) -> str:
    """The API server's own words for a refusal (its Status message), else the HTTP reason."""
    try:
        message = json.loads(exc.body or "{}").get("message")
    except (TypeError, ValueError, AttributeError):
        message = None
    return f"{exc.status} {message or exc.reason}"


def eviction_line(pod) -> str:
    notes = []
    if any(v.empty_dir is not None for v in (pod.spec.volumes if pod.spec else None) or []):
        notes.append("its emptyDir data is lost")
    if not any(o.controller for o in pod.metadata.owner_references or []):
        notes.append("no controller: gone for good")
    return f"evict {pod.metadata.namespace}/{pod.metadata.name}" + (f" ({'; '.join(notes)})" if notes else "")


def release(core, module) -> dict:
    """Uncordon the nodes of ``names`` that a cargoship run cordoned and left so (it was interrupted) and
    that are Ready again. A node cordoned by anyone else is left alone."""
    changes = []
    for name in module.params["names"]:
        node = core.read_node(name)
        owner = (node.metadata.annotations or {}).get(CORDONED_BY)
        # Ready from a kubelet that still renews its Lease: a stopped one leaves its old Ready behind.
        alive = is_ready(node) and kubelet_silent(module, lease_age(core, name)) is None
        if owner and node.spec.unschedulable and alive:
            changes.append(f"uncordon {name} (left cordoned by run {owner})")
            if not module.check_mode:
                core.patch_node(name, UNCORDON)
    return {"changed": bool(changes), "changes": changes}


def kubelet_silent(module, age: float) -> str | None:
    """How a kubelet whose Lease is ``age`` seconds old counts as down (not renewed within ``fresh_within``:
    a stopped kubelet leaves its node's old Ready behind), else None."""
    if age <= module.params["fresh_within"]:
        return None
    return "has no Lease" if age == float("inf") else f"last renewed its Lease {int(age)} s ago"


def terminate_later(name: str, silent: str) -> str:
    # The API server only marks an evicted pod; the node's kubelet stops it and lets it go. On a node whose
    # kubelet is down it stays Terminating until a kubelet is back or someone force-deletes it (Kubernetes
    # docs, "Force Delete StatefulSet Pods": pods are not deleted automatically when a node is
    # unreachable). Its replacement is already scheduled elsewhere; waiting would only wait for the
    # restart this drain comes before, so the drain does not.
    return f"not waiting for the evicted pods to terminate: the kubelet of {name} {silent}; they terminate once the engine is back"


def nowhere_else(node_name: str, nodes: list) -> str | None:
    """What becomes of a drain's evicted pods when no other node can take them (a one-node k3s, say: every
    other node cordoned or not Ready), else None. Their controllers recreate them, and the scheduler leaves
    them Pending until a node takes pods again (kubernetes.io, "Safely Drain a Node")."""
    if any(n.metadata.name != node_name and not n.spec.unschedulable and is_ready(n) for n in nodes):
        return None
    return (
        f"no other node takes pods (each is cordoned or not Ready): the evicted pods wait, Pending, until "
        f"{node_name} is back; with cargoship_restart: in_place the engine restarts without a drain and the pods "
        "keep running"
    )


def drain(core, module, node, listed: dict | None = None) -> list[str]:
    p = module.params
    node_name = node.metadata.name
    changes = [] if node.spec.unschedulable else ["cordon"]
    pods, blockers = pods_to_evict(core, module, node_name, listed)
    changes += [eviction_line(pod) for pod in pods]
    if pods and not blockers:
        stranded = nowhere_else(node_name, (listed or {}).get("nodes") or core.list_node().items)
        changes += [stranded] if stranded else []
    if blockers:
        # As kubectl drain would fail: refused before the node is touched (not even cordoned).
        refusal = f"drain of {node_name} refused: {'; '.join(blockers)}"
        if module.check_mode:
            return [*changes, refusal]
        module.fail_json(msg=refusal, refused=blockers, changes=[], ready=is_ready(node))
    if module.check_mode:
        if pods:
            leases = (listed or {}).get("leases")
            age = age_of(leases.get(node_name)) if leases is not None else lease_age(core, node_name)
            silent = p.get("kubelet_down") or kubelet_silent(module, age)
            changes += [terminate_later(node_name, silent)] if silent else []
        return changes
    if not node.spec.unschedulable:
        # Marked as ours, so that a later run can give back a node an interrupted run left cordoned.
        cordon = {
            "spec": {"unschedulable": True},
            "metadata": {"annotations": {CORDONED_BY: p["owner"] or "cargoship"}},
        }
        core.patch_node(p["name"], cordon)
    deadline = time.monotonic() + p["timeout"]
    pending = {(pod.metadata.namespace, pod.metadata.name): pod.metadata.uid for pod in pods}
    refusals: dict[tuple[str, str], str] = {}
    while pending:
        for namespace, name in list(pending):
            try:
                core.create_namespaced_pod_eviction(name, namespace)
            except ApiException as exc:
                if exc.status == 404:
                    pending.pop((namespace, name))
                    continue
                if exc.status == 429:
                    refusals[(namespace, name)] = "a PodDisruptionBudget does not allow it yet"
                    continue
                module.fail_json(
                    msg=f"drain of {p['name']} stopped: the API refused to evict {namespace}/{name}: {api_message(exc)}",
                    changes=changes,
                    ready=is_ready(node),
                )
            pending.pop((namespace, name))
            refusals.pop((namespace, name), None)
        if not pending:
            break
        if time.monotonic() + p["retry_delay"] > deadline:
            blocked = ", ".join(f"{ns}/{n} ({refusals.get((ns, n), 'not evicted')})" for ns, n in sorted(pending))
            module.fail_json(
                msg=f"drain of {p['name']} did not finish within {p['timeout']}s: {blocked}",
                changes=changes,
                ready=is_ready(node),
            )
        time.sleep(p["retry_delay"])
    evicted = time.monotonic()
    while not all(pod_gone(core, pod) for pod in pods):
        silent = p.get("kubelet_down") or kubelet_silent(module, lease_age(core, node_name))
        if silent:
            return [*changes, terminate_later(node_name, silent)]
        if time.monotonic() > deadline:
            module.fail_json(msg=f"timed out waiting for evicted pods of {node_name} to terminate", changes=changes)
        pause(evicted)
    return changes


def pod_gone(core, pod) -> bool:
    try:
        current = core.read_namespaced_pod(pod.metadata.name, pod.metadata.namespace)
    except ApiException as exc:
        if exc.status == 404:
            return True
        raise
    return current.metadata.uid != pod.metadata.uid


def wait_until(module, condition, what: str, deadline: float) -> None:
    began = time.monotonic()
    while not condition():
        if time.monotonic() > deadline:
            module.fail_json(msg=f"timed out waiting for {what}")
        pause(began)


def lease_renewed(core, name: str) -> datetime.datetime | None:
    """When the node's kubelet last renewed its Lease in kube-node-lease (None without one)."""
    try:
        return core.read_namespaced_lease(name, "kube-node-lease").spec.renew_time
    except ApiException as exc:
        if exc.status != 404:
            raise
        return None


def lease_age(core, name: str) -> float:
    """Seconds since the node's kubelet renewed its Lease (infinite without one). The control host's clock
    against the kubelet's: the windows it is compared with are wide enough for ordinary skew."""
    return age_of(lease_renewed(core, name))


def age_of(renewed: datetime.datetime | None) -> float:
    """Seconds since a Lease renewal time (infinite for none)."""
    return float("inf") if renewed is None else (datetime.datetime.now(datetime.UTC) - renewed).total_seconds()


def check_known(core, module) -> dict:
    """Every host's node is one the cluster has, and no two hosts are the same node."""
    node_of = module.params["node_of"]
    by_node: dict[str, list[str]] = {}
    for host, node in node_of.items():
        by_node.setdefault(str(node), []).append(host)
    problems = [
        f"{' and '.join(sorted(hosts))} are all node {node}"
        for node, hosts in sorted(by_node.items())
        if len(hosts) > 1
    ]
    listed = core.list_node().items
    existing = {n.metadata.name for n in listed}
    # Nodes an interrupted run cordoned and left so: the sync gives them back, and needs no call without one.
    left_cordoned = sorted(
        n.metadata.name
        for n in listed
        if n.metadata.name in by_node
        and n.spec
        and n.spec.unschedulable
        and CORDONED_BY in (n.metadata.annotations or {})
    )
    for host, node in sorted(node_of.items()):
        if node not in existing:
            named = "" if node == host else " (its engine's node name)"
            problems.append(f"{host}: the cluster has no node {node}{named}")
    if problems:
        module.fail_json(
            msg="hosts and nodes do not match: " + "; ".join(problems) + ". Nothing was touched",
            problems=problems,
        )
    return {
        "changed": False,
        "changes": [],
        "renamed": {h: n for h, n in node_of.items() if h != n},
        "left_cordoned": left_cordoned,
    }


def etcd_learner(node) -> str | None:
    """Why ``node``'s etcd member is not a voter yet, from the condition k3s and RKE2 set on servers with
    embedded etcd (``EtcdIsVoter``; real-engines.md, "The API server and etcd"), else None (a voter, or
    a node that does not report it)."""
    condition = next((c for c in node.status.conditions or [] if c.type == "EtcdIsVoter"), None)
    if condition is None or condition.status != "False":
        return None
    return condition.message or condition.reason or "a learner"


def internal_address(node) -> str | None:
    return next((a.address for a in node.status.addresses or [] if a.type == "InternalIP" and a.address), None)


def server_url(address: str, port: int) -> str:
    return f"https://[{address}]:{port}" if ":" in address else f"https://{address}:{port}"


def api_answers(core, node, port: int) -> tuple[str | None, bool]:
    """Whether the API server on a controller answers ready: (the problem or None, whether it may pass by
    waiting). An API server that is still starting answers 503 (wait); one that refuses connections for
    the retry time is down (refuse at once)."""
    name = node.metadata.name
    address = internal_address(node)
    if address is None:
        return f"controller {name} has no InternalIP address, so its API server cannot be checked", False
    url = server_url(address, port)
    try:
        status, body = core.get_text("/readyz", server=url)
    except ApiUnavailable as exc:
        return f"the API server of {name} at {url} does not answer ({exc.last})", False
    except Exception as exc:  # a certificate that does not verify, an address that does not resolve
        return f"the API server of {name} at {url} cannot be checked: {type(exc).__name__}: {exc}", False
    if status in (401, 403) and not core.verifies_servers():
        # Asked without credentials (the kubeconfig does not pin the cluster's CA): an API server that
        # answers, and does not show its readiness to anonymous callers (anonymous access turned off).
        return None, False
    if status != 200:
        return f"the API server of {name} at {url} is not ready ({status}: {body.strip()[:120]!r})", True
    return None, False


def stop_problems(core, module) -> tuple[list[str], list[str]]:
    """Why the cluster cannot lose controller ``name`` now: (the problems that refuse it, the ones that
    may pass by waiting: a member that is still a learner, an API server still starting).

    The members are the nodes labelled control-plane or etcd (an etcd-only member counts towards the
    quorum though it runs no API server) and any of ``names``. Etcd keeps its quorum without ``name`` only
    if every other member runs (Ready from a kubelet that renews its Lease, not a stale Ready) and
    votes; the API server's own etcd check passes with a member down, so the members are counted here."""
    p = module.params
    nodes = {n.metadata.name: n for n in core.list_node().items}
    labelled = {name for name, n in nodes.items() if {CONTROL_PLANE, ETCD_ROLE} & set(n.metadata.labels or {})}
    leases = {
        lease.metadata.name: lease.spec.renew_time for lease in core.list_namespaced_lease("kube-node-lease").items
    }
    refusals, waits = [], []
    healthy_voters = 0
    for other in sorted(labelled | set(p["names"] or [])):
        if other == p["name"]:
            continue
        node = nodes.get(other)
        role = "controller" if node is None or CONTROL_PLANE in (node.metadata.labels or {}) else "etcd member"
        if node is None:
            refusals.append(f"controller {other} is not in the cluster")
            continue
        silent = kubelet_silent(module, age_of(leases.get(other)))
        if not is_ready(node):
            refusals.append(f"{role} {other} is not Ready")
            continue
        if silent:
            refusals.append(f"{role} {other} shows Ready but its kubelet {silent}")
            continue
        learner = etcd_learner(node)
        if learner:
            waits.append(f"{role} {other} is not an etcd voter yet ({learner})")
        elif ETCD_ROLE in (node.metadata.labels or {}):
            healthy_voters += 1
        if role == "controller":
            problem, passes = api_answers(core, node, p["api_port"])
            if problem:
                (waits if passes else refusals).append(problem)
    # Etcd stays writable only while a majority of its members vote: counted without this one.
    members = {name for name in labelled if ETCD_ROLE in (nodes[name].metadata.labels or {})}
    if p["name"] in members and len(members) > 1 and not refusals:
        needed = len(members) // 2 + 1
        if healthy_voters < needed and not waits and not p["allow_quorum_loss"]:
            refusals.append(
                f"etcd has {len(members)} members: without {p['name']}, {healthy_voters} healthy "
                f"voter{'s are' if healthy_voters != 1 else ' is'} left, fewer than the {needed} of a quorum, so the "
                "API would be unavailable until it is back"
                + (
                    " (two members cannot lose either: run three servers, or set cargoship_allow_etcd_quorum_loss "
                    "to accept that outage)"
                    if len(members) == 2
                    else ""
                )
            )
    status, body = core.get_text("/readyz/etcd")
    if status not in (200, 404):  # 404: no embedded etcd behind this API server
        waits.append(f"the API server's etcd check fails ({status}: {body.strip()[:120]!r})")
    return refusals, waits


def check_safe_to_stop(core, module) -> dict:
    """Fail unless the cluster can lose controller ``name`` now (see :func:`stop_problems`). What may pass
    by waiting (a member that rejoined as a learner, an API server still starting) is waited for, within
    ``timeout``, outside check mode; anything else refuses at once."""
    p = module.params
    deadline = time.monotonic() + p["timeout"]
    began = time.monotonic()
    while True:
        refusals, waits = stop_problems(core, module)
        if refusals or not waits or module.check_mode or time.monotonic() > deadline:
            break
        pause(began)
    problems = refusals + waits
    if problems:
        waited = f" (waited {p['timeout']} s)" if waits and not refusals and not module.check_mode else ""
        module.fail_json(
            msg=f"not stopping {p['name']}: "
            + "; ".join(problems)
            + waited
            + ". Nothing was touched; the rollout stops here",
            problems=problems,
        )
    return {"changed": False, "changes": []}


def wait_ready(core, module) -> None:
    p = module.params
    deadline = time.monotonic() + p["timeout"]
    if not p["restarted_after"]:
        wait_until(module, lambda: is_ready(core.read_node(p["name"])), f"node {p['name']} to be Ready", deadline)
        return
    try:
        since = parse_time(p["restarted_after"])
    except ValueError:
        module.fail_json(msg=f"restarted_after is not an RFC 3339 time: {p['restarted_after']!r}")
    began = time.monotonic()
    while True:
        back, why = back_since(core, p["name"], since)
        if back:
            return
        if time.monotonic() > deadline:
            module.fail_json(msg=f"node {p['name']} not back within {p['timeout']}s: {why}", ready=False)
        pause(began)


# -- one handler per (state, what it works on); each returns the module's result -----------------------


def drained(core, module) -> dict:
    if module.params.get("only_if_safe_to_stop"):
        # A controller: the cluster must be able to lose it, checked in the same call just before the drain.
        check_safe_to_stop(core, module)
    changes = drain(core, module, core.read_node(module.params["name"]))
    return outcome(core, module, changes)


def drains_assessed(core, module) -> dict:
    """Check mode only: what draining each node of ``names`` would do."""
    # Four API calls for the whole batch, however many nodes: the nodes, the pods, the budgets, the Leases.
    nodes = {node.metadata.name: node for node in core.list_node().items}
    listed: dict = {"pods": {}, "budgets": [], "nodes": list(nodes.values())}
    for pod in core.list_pod_for_all_namespaces().items:
        listed["pods"].setdefault(pod.spec.node_name if pod.spec else None, []).append(pod)
    listed["budgets"] = core.list_pod_disruption_budget_for_all_namespaces().items
    leases = core.list_namespaced_lease("kube-node-lease").items
    listed["leases"] = {lease.metadata.name: lease.spec.renew_time for lease in leases}
    by_node = {}
    for name in module.params["names"]:
        if name not in nodes:
            module.fail_json(msg=f"node {name} is not in the cluster")
        by_node[name] = drain(core, module, nodes[name], listed)
    return {"changed": any(by_node.values()), "by_node": by_node}


def uncordoned(core, module) -> dict:
    name, owner = module.params["name"], module.params["owner"]
    node = core.read_node(name)
    marked_by = (node.metadata.annotations or {}).get(CORDONED_BY)
    # With an owner, lift only a cargoship run's cordon (this run's, or one a lost run left): a node
    # someone cordoned for their own reasons stays so.
    changes = ["uncordon"] if node.spec.unschedulable and (owner is None or marked_by is not None) else []
    if changes and not module.check_mode:
        core.patch_node(name, UNCORDON)
    return outcome(core, module, changes, node)


def one_ready(core, module) -> dict:
    if not module.check_mode:
        wait_ready(core, module)
    if module.params["uncordon"]:
        # Ready, then schedulable again, in one call: one API client, one module run per node.
        return {**uncordoned(core, module), "uncordoned": True}
    return outcome(core, module, [])


def all_ready(core, module) -> dict:
    names = module.params["names"]

    def ready() -> bool:
        return all(is_ready(core.read_node(name)) for name in names)

    if not module.check_mode:
        wait_until(module, ready, f"nodes {', '.join(names)} to be Ready", time.monotonic() + module.params["timeout"])
    return {"changed": False, "ready": ready()}


def labeled(core, module) -> dict:
    name = module.params["name"]
    node = core.read_node(name)
    current = node.metadata.labels or {}
    wanted = {k: str(v) for k, v in module.params["labels"].items() if current.get(k) != str(v)}
    changes = [f"label {k}={v}" for k, v in sorted(wanted.items())]
    if wanted and not module.check_mode:
        core.patch_node(name, {"metadata": {"labels": wanted}})
    return outcome(core, module, changes, node)


def outcome(core, module, changes: list, node=None) -> dict:
    """The result for one node: its changes, and whether it is Ready now."""
    if module.check_mode and node is not None:
        ready = is_ready(node)
    else:
        ready = is_ready(core.read_node(module.params["name"]))
    return {"changed": bool(changes), "changes": changes, "ready": ready}
