"""Kubernetes API test double for the lab: enough of the real API that ``kubectl`` and the Python
``kubernetes`` client work against it unchanged.

What it serves: discovery (so ``kubectl`` finds resources and the eviction subresource), nodes,
namespaces, pods, DaemonSets, ReplicaSets, PodDisruptionBudgets and the HelmChart(Config) kinds of
k3s/RKE2; get/list (label and field selectors)/create/replace/patch (merge, strategic-merge as
merge, JSON patch)/delete; Table responses for ``kubectl get``; the eviction subresource with real
PodDisruptionBudget arithmetic (429 until the budget allows it; 500 when more than one budget matches
the pod, as kube-apiserver answers: real-engines.md, "Draining"). A deleted or evicted pod is not gone
at once: it is marked for deletion and terminates over its grace period (``terminationGracePeriodSeconds``,
30 s by default), and only while its node's kubelet is alive to finish it (real-engines.md, "evicted pod").

Small controllers keep it honest: a DaemonSet has a pod on every node, a ReplicaSet keeps its replica
count on schedulable Ready nodes (so an evicted pod reappears elsewhere, as on a real cluster; a template
that names its node, ``nodeName``, binds them there), and a node whose kubelet stops (no status post, no
renewal of its Lease in ``kube-node-lease``) keeps its last status until the grace period ends, then
turns ``Ready=Unknown`` as the node lifecycle controller does (40 s, ``--node-monitor-grace-period``;
Kubernetes issue 127352). Nothing else counts as a heartbeat: a cordon or a label is not the kubelet.
``POST /lab/node-grace`` (a test-bed endpoint, not Kubernetes) shortens the grace period for a test that
says why; ``/readyz/etcd`` answers as kube-apiserver's etcd check does, and ``POST /lab/etcd-healthy``
makes it fail. ``POST /lab/learner`` (``{"node", "seconds"}``) makes a server's etcd member rejoin as a
learner at its next start (``EtcdIsVoter=False`` on its node) and promotes it after ``seconds``.

It can also fail as a real API server fails under load, during an etcd leader change or right after its
start (real-engines.md, "The API server and etcd"): ``POST /lab/faults`` with ``{"faults": [...]}`` (an
empty list clears them; ``GET /lab/faults`` lists them with how often each was hit). A fault is
``{"kind": "status", "status": 429|500|502|503|504}`` (kube-apiserver's own answer for that status, see
``FAULT_ANSWERS``: the transient ones and 401, 403, 409 and 422; 429 with ``Retry-After``, ``retry_after`` seconds, 1 by default), ``{"kind": "reset"}``
(the connection is dropped without an answer) or ``{"kind": "slow", "delay": seconds}`` (answered late),
for ``seconds`` from now or ``count`` requests (whichever ends first; neither: until cleared), on paths
starting with one of ``paths`` (all by default), ``methods`` (all by default) and from ``users`` (every
caller by default). ``/lab/`` itself never fails. The first fault that matches a request is the one it meets.

Callers are told apart by their bearer token, as kube-apiserver tells them apart by their credentials: the
operator's (``--token-file``, user ``lab-operator``) and the kubelets' (``--node-token-file``, user
``system:node``). A 403 aimed at the operator (``"users": ["lab-operator"]``) is what RBAC does to a user who
may read nodes but not patch them: the kubelets, with their own credentials, still post their nodes' status.

Usage: python kube_double.py --listen 172.31.251.1:6443 --cert C --key K --token-file T --node-token-file N
"""

from __future__ import annotations

import argparse
import copy
import datetime
import hmac
import json
import re
import socket
import ssl
import struct
import threading
import time
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

NODE_GRACE_SECONDS = 40
POD_GRACE_SECONDS = 30  # a pod's terminationGracePeriodSeconds when it does not set one
CONTROLLER_PERIOD_SECONDS = 0.5
ANONYMOUS_PATHS = {"/healthz", "/readyz", "/livez", "/version"}
# The two callers the double knows (by their bearer tokens): the operator, and the kubelets on the hosts.
OPERATOR, KUBELETS = "lab-operator", "system:node"


def now_iso() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Resource:
    def __init__(
        self,
        group: str,
        version: str,
        plural: str,
        kind: str,
        namespaced: bool,
        short: tuple[str, ...] = (),
        subresources: tuple[str, ...] = (),
    ):
        self.group, self.version, self.plural, self.kind = group, version, plural, kind
        self.namespaced, self.short, self.subresources = namespaced, short, subresources

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


RESOURCES = [
    Resource("", "v1", "namespaces", "Namespace", False, ("ns",)),
    Resource("", "v1", "nodes", "Node", False, ("no",), ("status",)),
    Resource("", "v1", "pods", "Pod", True, ("po",), ("status", "eviction")),
    Resource("", "v1", "configmaps", "ConfigMap", True, ("cm",)),
    Resource("", "v1", "events", "Event", True, ("ev",)),
    Resource("apps", "v1", "daemonsets", "DaemonSet", True, ("ds",)),
    Resource("apps", "v1", "replicasets", "ReplicaSet", True, ("rs",)),
    # helm-controller's helm-install-<chart> jobs (real-engines.md, "What a running engine shows").
    Resource("batch", "v1", "jobs", "Job", True),
    Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, ("pdb",)),
    Resource("coordination.k8s.io", "v1", "leases", "Lease", True),
    Resource("helm.cattle.io", "v1", "helmchartconfigs", "HelmChartConfig", True),
    Resource("helm.cattle.io", "v1", "helmcharts", "HelmChart", True),
    # What the engine's deploy controller records per manifest file (real-engines.md, "server/manifests/").
    Resource("k3s.cattle.io", "v1", "addons", "Addon", True),
]
BY_PATH = {(r.group, r.version, r.plural): r for r in RESOURCES}


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str, details: dict | None = None):
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details

    def status(self) -> dict:
        body = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details:
            body["details"] = self.details
        return body


def merge_patch(target: object, patch: object) -> object:
    """RFC 7386 JSON merge patch (also used for strategic merge patches of the fields we serve)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def json_patch(target: dict, operations: list) -> dict:
    doc = copy.deepcopy(target)
    for op in operations:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].lstrip("/").split("/")]
        parent = doc
        for part in parts[:-1]:
            parent = parent[int(part)] if isinstance(parent, list) else parent.setdefault(part, {})
        last = parts[-1]
        if op["op"] in ("add", "replace"):
            if isinstance(parent, list):
                index = len(parent) if last == "-" else int(last)
                parent.insert(index, op["value"]) if op["op"] == "add" else parent.__setitem__(index, op["value"])
            else:
                parent[last] = op["value"]
        elif op["op"] == "remove":
            parent.pop(int(last) if isinstance(parent, list) else last)
        elif op["op"] == "test":
            current = parent[int(last)] if isinstance(parent, list) else parent.get(last)
            if current != op["value"]:
                raise ApiError(422, "Invalid", f"test operation failed at {op['path']}")
        else:
            raise ApiError(422, "Invalid", f"unsupported JSON patch operation {op['op']}")
    return doc


def parse_label_selector(text: str) -> list:
    """Requirements of a label selector string: ``a=b``, ``a!=b``, ``a``, ``!a``, ``a in (x,y)``."""
    requirements = []
    for raw in re.findall(r"[^,(]+(?:\([^)]*\))?", text or ""):
        term = raw.strip()
        if not term:
            continue
        match = re.match(r"^([\w./-]+)\s+(in|notin)\s+\(([^)]*)\)$", term)
        if match:
            values = {v.strip() for v in match.group(3).split(",")}
            requirements.append((match.group(1), match.group(2), values))
        elif "!=" in term:
            key, value = term.split("!=", 1)
            requirements.append((key.strip(), "!=", value.strip()))
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            requirements.append((key.strip(), "=", value.strip()))
        elif term.startswith("!"):
            requirements.append((term[1:].strip(), "!", None))
        else:
            requirements.append((term, "exists", None))
    return requirements


def labels_match(labels: dict, requirements: list) -> bool:
    for key, op, value in requirements:
        present = key in labels
        if op == "=" and labels.get(key) != value:
            return False
        if op == "!=" and labels.get(key) == value:
            return False
        if op == "exists" and not present:
            return False
        if op == "!" and present:
            return False
        if op == "in" and labels.get(key) not in value:
            return False
        if op == "notin" and present and labels.get(key) in value:
            return False
    return True


def selector_matches(selector: dict | None, labels: dict) -> bool:
    """A metav1.LabelSelector (matchLabels + matchExpressions) against labels."""
    if not selector:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], set(expr.get("values") or [])
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and labels.get(key) in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def field_value(obj: dict, path: str) -> str:
    value: object = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return "" if value is None else str(value)


def fields_match(obj: dict, text: str) -> bool:
    for term in filter(None, (t.strip() for t in (text or "").split(","))):
        if "!=" in term:
            key, value = term.split("!=", 1)
            if field_value(obj, key.strip()) == value.strip():
                return False
        else:
            key, value = term.replace("==", "=").split("=", 1)
            if field_value(obj, key.strip()) != value.strip():
                return False
    return True


def node_ready(node: dict) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in node.get("status", {}).get("conditions", [])
    )


def pod_grace(pod: dict) -> int:
    value = pod.get("spec", {}).get("terminationGracePeriodSeconds")
    return POD_GRACE_SECONDS if value is None else int(value)


def pod_ready(pod: dict) -> bool:
    return pod.get("status", {}).get("phase") == "Running" and not pod["metadata"].get("deletionTimestamp")


class Store:
    """All objects, keyed by (group, plural, namespace, name); one lock guards everything."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.objects: dict[tuple[str, str, str, str], dict] = {}
        self.revision = 1
        self.heartbeats: dict[str, float] = {}
        # Pods marked for deletion: (namespace, name) -> (uid, when their grace period ends).
        self.terminating: dict[tuple[str, str], tuple[str, float]] = {}
        self.node_grace = NODE_GRACE_SECONDS
        self.etcd_healthy = True
        # Etcd members held as learners (POST /lab/learner): node -> seconds, armed for its next start;
        # node -> when it is promoted, for one that is a learner now.
        self.learner_armed: dict[str, float] = {}
        self.promoted_at: dict[str, float] = {}
        self.promotions: list[dict] = []  # {"node", "at": wall-clock seconds}, for tests to order events by
        for ns in ("default", "kube-system", "kube-public", "kube-node-lease"):
            self.create(BY_PATH[("", "v1", "namespaces")], "", {"metadata": {"name": ns}})

    def _stamp(self, resource: Resource, obj: dict) -> None:
        self.revision += 1
        obj["apiVersion"], obj["kind"] = resource.api_version, resource.kind
        obj["metadata"]["resourceVersion"] = str(self.revision)

    def get(self, resource: Resource, namespace: str, name: str) -> dict:
        with self.lock:
            obj = self.objects.get((resource.group, resource.plural, namespace, name))
            if obj is None:
                group = f"{resource.plural}.{resource.group}" if resource.group else resource.plural
                raise ApiError(
                    404,
                    "NotFound",
                    f'{group} "{name}" not found',
                    {"name": name, "kind": resource.plural, "group": resource.group},
                )
            return copy.deepcopy(obj)

    def list(self, resource: Resource, namespace: str | None, labels: str = "", fields: str = "") -> list[dict]:
        requirements = parse_label_selector(labels)
        with self.lock:
            found = [
                copy.deepcopy(obj)
                for (group, plural, ns, _name), obj in sorted(self.objects.items())
                if group == resource.group
                and plural == resource.plural
                and (namespace is None or ns == namespace)
                and labels_match(obj["metadata"].get("labels") or {}, requirements)
                and fields_match(obj, fields)
            ]
        return found

    def create(self, resource: Resource, namespace: str, obj: dict) -> dict:
        with self.lock:
            obj = copy.deepcopy(obj)
            meta = obj.setdefault("metadata", {})
            if not meta.get("name") and meta.get("generateName"):
                meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
            if not meta.get("name"):
                raise ApiError(422, "Invalid", "metadata.name: Required value")
            if resource.namespaced:
                meta["namespace"] = namespace
                if ("", "namespaces", "", namespace) not in self.objects:
                    raise ApiError(404, "NotFound", f'namespaces "{namespace}" not found')
            key = (resource.group, resource.plural, namespace if resource.namespaced else "", meta["name"])
            if key in self.objects:
                raise ApiError(409, "AlreadyExists", f'{resource.plural} "{meta["name"]}" already exists')
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = now_iso()
            meta.setdefault("labels", {})
            self._defaults(resource, obj)
            self._stamp(resource, obj)
            self.objects[key] = obj
            if resource.plural == "nodes" or (resource.plural == "leases" and namespace == "kube-node-lease"):
                self.heartbeats[meta["name"]] = time.monotonic()
            return copy.deepcopy(obj)

    def replace(self, resource: Resource, namespace: str, name: str, obj: dict, subresource: str = "") -> dict:
        with self.lock:
            current = self.get(resource, namespace, name)
            sent_version = obj.get("metadata", {}).get("resourceVersion")
            if sent_version and sent_version != current["metadata"]["resourceVersion"]:
                raise ApiError(
                    409,
                    "Conflict",
                    f'Operation cannot be fulfilled on {resource.plural} "{name}": '
                    "the object has been modified; please apply your changes to the latest version",
                )
            if subresource == "status":
                current["status"] = obj.get("status", {})
                updated = current
            else:
                updated = copy.deepcopy(obj)
                for field in ("uid", "creationTimestamp", "namespace", "name"):
                    if field in current["metadata"]:
                        updated.setdefault("metadata", {})[field] = current["metadata"][field]
                updated.setdefault("status", current.get("status", {}))
            return self._save(resource, namespace, name, updated, subresource)

    def patch(
        self, resource: Resource, namespace: str, name: str, patch: object, content_type: str, subresource: str = ""
    ) -> dict:
        with self.lock:
            current = self.get(resource, namespace, name)
            if "json-patch" in content_type:
                updated = json_patch(current, patch)
            else:
                updated = merge_patch(current, patch)
            if subresource == "status":
                current["status"] = updated.get("status", {})
                updated = current
            updated["metadata"]["name"], updated["metadata"]["uid"] = name, current["metadata"]["uid"]
            return self._save(resource, namespace, name, updated, subresource)

    def _save(self, resource: Resource, namespace: str, name: str, obj: dict, subresource: str = "") -> dict:
        self._stamp(resource, obj)
        self.objects[(resource.group, resource.plural, namespace if resource.namespaced else "", name)] = obj
        # What the node lifecycle controller counts as the kubelet being alive: its status posts and
        # its Lease renewals. A cordon, a label or an annotation is not the kubelet.
        kubelet = (resource.plural == "nodes" and subresource == "status") or (
            resource.plural == "leases" and namespace == "kube-node-lease"
        )
        if kubelet:
            self.heartbeats[name] = time.monotonic()
        if resource.plural == "nodes" and subresource == "status" and name in self.learner_armed:
            self._hold_as_learner(obj, name)
        return copy.deepcopy(obj)

    def _hold_as_learner(self, node: dict, name: str) -> None:
        """A restarted member rejoins etcd as a learner and is promoted once it has caught up
        (real-engines.md, "The API server and etcd"); k3s's etcd controller shows it as EtcdIsVoter=False
        until then (k3s pkg/etcd/etcd.go, reason MemberIsLearner)."""
        for condition in node.get("status", {}).get("conditions") or []:
            if condition.get("type") == "EtcdIsVoter" and condition.get("status") == "True":
                condition.update(
                    status="False",
                    reason="MemberIsLearner",
                    message="Node has not been promoted from learner to voting member of the etcd cluster",
                    lastTransitionTime=now_iso(),
                )
                self.promoted_at[name] = time.monotonic() + self.learner_armed.pop(name)

    def _promote_learners(self) -> None:
        nodes = BY_PATH[("", "v1", "nodes")]
        for name, when in list(self.promoted_at.items()):
            if time.monotonic() < when:
                continue
            del self.promoted_at[name]
            self.promotions.append({"node": name, "at": time.time()})
            node = self.objects.get(("", "nodes", "", name))
            for condition in (node or {}).get("status", {}).get("conditions") or []:
                if condition.get("type") == "EtcdIsVoter":
                    condition.update(
                        status="True",
                        reason="MemberNotLearner",
                        message="Node is a voting member of the etcd cluster",
                        lastTransitionTime=now_iso(),
                    )
            if node is not None:
                self._stamp(nodes, node)

    def delete(self, resource: Resource, namespace: str, name: str) -> dict:
        with self.lock:
            obj = self.get(resource, namespace, name)
            del self.objects[(resource.group, resource.plural, namespace if resource.namespaced else "", name)]
            self.revision += 1
            return obj

    def _defaults(self, resource: Resource, obj: dict) -> None:
        if resource.plural == "pods":
            obj.setdefault("spec", {})
            obj.setdefault("status", {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]})
        if resource.plural == "namespaces":
            obj.setdefault("status", {"phase": "Active"})
        if resource.plural == "nodes":
            # kube-apiserver always returns a node's spec and status, empty or not: NodeSpec and NodeStatus
            # are struct fields of core/v1 Node, which Go's JSON encoding never omits (`kubectl get node -o
            # json` shows both, a status with no conditions before its kubelet posts one).
            obj.setdefault("spec", {})
            obj.setdefault("status", {})
        if resource.plural == "poddisruptionbudgets":
            obj.setdefault("status", {})

    # -- policy -------------------------------------------------------------------------------------
    def pdb_status(self, pdb: dict) -> dict:
        """The PodDisruptionBudget status a real disruption controller would compute."""
        namespace = pdb["metadata"]["namespace"]
        pods = [
            p
            for p in self.list(BY_PATH[("", "v1", "pods")], namespace)
            if selector_matches(pdb["spec"].get("selector"), p["metadata"].get("labels") or {})
        ]
        healthy = sum(1 for p in pods if pod_ready(p))
        expected = self.expected_pods(namespace, pods)
        spec = pdb["spec"]

        def resolve(value: object) -> int:
            if isinstance(value, str) and value.endswith("%"):
                return -(-int(value[:-1]) * expected // 100)
            return int(value)

        if "minAvailable" in spec:
            desired = resolve(spec["minAvailable"])
        elif "maxUnavailable" in spec:
            desired = max(0, expected - resolve(spec["maxUnavailable"]))
        else:
            desired = expected
        return {
            "currentHealthy": healthy,
            "desiredHealthy": desired,
            "expectedPods": expected,
            "disruptionsAllowed": max(0, healthy - desired),
            "observedGeneration": 1,
        }

    def expected_pods(self, namespace: str, pods: list[dict]) -> int:
        """Like the disruption controller: a ReplicaSet's pods count as its replica count, so a pod
        already evicted (and not yet replaced) still counts as expected but not as healthy."""
        expected, counted = 0, set()
        for pod in pods:
            owner = next((o for o in pod["metadata"].get("ownerReferences", []) if o.get("controller")), None)
            key = ("apps", "replicasets", namespace, owner["name"]) if owner and owner["kind"] == "ReplicaSet" else None
            if key and key in self.objects:
                if key not in counted:
                    counted.add(key)
                    expected += int(self.objects[key].get("spec", {}).get("replicas", 1))
            else:
                expected += 1
        return expected

    def terminate(self, namespace: str, name: str, grace: int | None = None) -> dict:
        """Delete a pod as the API server does: mark it and let it terminate over its grace period."""
        pods = BY_PATH[("", "v1", "pods")]
        with self.lock:
            pod = self.get(pods, namespace, name)
            meta = pod["metadata"]
            if meta.get("deletionTimestamp"):
                return pod
            seconds = pod_grace(pod) if grace is None else max(0, int(grace))
            if seconds == 0 or not pod.get("spec", {}).get("nodeName"):
                return self.delete(pods, namespace, name)  # no kubelet has to stop anything
            ends = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=seconds)
            meta["deletionTimestamp"] = ends.strftime("%Y-%m-%dT%H:%M:%SZ")
            meta["deletionGracePeriodSeconds"] = seconds
            self.terminating[(namespace, name)] = (meta["uid"], time.monotonic() + seconds)
            return self._save(pods, namespace, name, pod)

    def evict(self, namespace: str, name: str, grace: int | None = None) -> None:
        pods = BY_PATH[("", "v1", "pods")]
        with self.lock:
            pod = self.get(pods, namespace, name)
            labels = pod["metadata"].get("labels") or {}
            budgets = [
                pdb
                for pdb in self.list(BY_PATH[("policy", "v1", "poddisruptionbudgets")], namespace)
                if selector_matches(pdb["spec"].get("selector"), labels)
            ]
            if len(budgets) > 1:
                # kube-apiserver's eviction REST handler (real-engines.md, "Draining").
                raise ApiError(
                    500,
                    "InternalError",
                    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
                )
            if pod["metadata"].get("deletionTimestamp"):
                return  # already terminating: no budget is consulted again
            for pdb in budgets:
                status = self.pdb_status(pdb)
                if pod_ready(pod) and status["disruptionsAllowed"] < 1:
                    raise ApiError(
                        429,
                        "TooManyRequests",
                        "Cannot evict pod as it would violate the pod's disruption budget.",
                        {
                            "causes": [
                                {
                                    "reason": "DisruptionBudget",
                                    "message": f"The disruption budget {pdb['metadata']['name']} needs "
                                    f"{status['desiredHealthy']} healthy pods and has "
                                    f"{status['currentHealthy']} currently",
                                }
                            ]
                        },
                    )
            self.terminate(namespace, name, grace)

    # -- controllers --------------------------------------------------------------------------------
    def reconcile(self) -> None:
        with self.lock:
            self._expire_nodes()
            self._promote_learners()
            self._finish_terminations()
            nodes = self.list(BY_PATH[("", "v1", "nodes")], None)
            pods = BY_PATH[("", "v1", "pods")]
            for ds in self.list(BY_PATH[("apps", "v1", "daemonsets")], None):
                for node in nodes:
                    pod_name = f"{ds['metadata']['name']}-{node['metadata']['name']}"
                    if (pods.group, pods.plural, ds["metadata"]["namespace"], pod_name) not in self.objects:
                        self._create_owned_pod(ds, pod_name, node["metadata"]["name"])
            for pdb in self.list(BY_PATH[("policy", "v1", "poddisruptionbudgets")], None):
                status = self.pdb_status(pdb)
                if pdb.get("status") != status:
                    pdb["status"] = status
                    self.objects[
                        ("policy", "poddisruptionbudgets", pdb["metadata"]["namespace"], pdb["metadata"]["name"])
                    ] = pdb
            schedulable = [
                n["metadata"]["name"] for n in nodes if node_ready(n) and not n.get("spec", {}).get("unschedulable")
            ]
            for rs in self.list(BY_PATH[("apps", "v1", "replicasets")], None):
                owned = [
                    p
                    for p in self.list(pods, rs["metadata"]["namespace"])
                    if any(o.get("uid") == rs["metadata"]["uid"] for o in p["metadata"].get("ownerReferences", []))
                    and not p["metadata"].get("deletionTimestamp")  # a terminating pod is replaced at once
                ]
                missing = int(rs.get("spec", {}).get("replicas", 1)) - len(owned)
                # A template that names its node binds its pods there: nodeName bypasses the scheduler
                # (kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#nodename), Ready node or
                # not; on a node that is not Ready no kubelet starts the pod, and it stays Pending (a pod is
                # Pending until its node's kubelet has started its containers:
                # kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#pod-phase).
                bound = rs.get("spec", {}).get("template", {}).get("spec", {}).get("nodeName")
                for _replica in range(max(0, missing)):
                    name = f"{rs['metadata']['name']}-{uuid.uuid4().hex[:5]}"
                    if bound:
                        self._create_owned_pod(
                            rs,
                            name,
                            bound,
                            started=any(n["metadata"]["name"] == bound and node_ready(n) for n in nodes),
                        )
                        continue
                    if not schedulable:
                        break
                    load = {n: 0 for n in schedulable}
                    for p in self.list(pods, None):
                        if p.get("spec", {}).get("nodeName") in load:
                            load[p["spec"]["nodeName"]] += 1
                    target = min(schedulable, key=lambda n: (load[n], n))
                    self._create_owned_pod(rs, name, target)

    def _create_owned_pod(self, owner: dict, name: str, node: str, started: bool = True) -> None:
        """A pod of ``owner`` on ``node``: running and Ready, or, not ``started``, Pending and not Ready."""
        template = owner.get("spec", {}).get("template", {})
        pod = {
            "metadata": {
                "name": name,
                "labels": dict(template.get("metadata", {}).get("labels") or {}),
                "ownerReferences": [
                    {
                        "apiVersion": owner["apiVersion"],
                        "kind": owner["kind"],
                        "name": owner["metadata"]["name"],
                        "uid": owner["metadata"]["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": {**copy.deepcopy(template.get("spec", {})), "nodeName": node},
        }
        if not started:
            pod["status"] = {"phase": "Pending", "conditions": [{"type": "Ready", "status": "False"}]}
        self.create(BY_PATH[("", "v1", "pods")], owner["metadata"]["namespace"], pod)

    def _finish_terminations(self) -> None:
        """A terminating pod goes once its grace period is over and its node's kubelet is there to stop
        it; on a node whose kubelet stopped it stays Terminating, as on a real cluster."""
        pods = BY_PATH[("", "v1", "pods")]
        now = time.monotonic()
        for (namespace, name), (uid, ends) in list(self.terminating.items()):
            pod = self.objects.get(("", "pods", namespace, name))
            if pod is None or pod["metadata"]["uid"] != uid:
                del self.terminating[(namespace, name)]
                continue
            node = pod.get("spec", {}).get("nodeName", "")
            if now >= ends and self.heartbeats.get(node, 0) >= now - self.node_grace:
                self.delete(pods, namespace, name)
                del self.terminating[(namespace, name)]

    def _expire_nodes(self) -> None:
        deadline = time.monotonic() - self.node_grace
        for node in self.list(BY_PATH[("", "v1", "nodes")], None):
            name = node["metadata"]["name"]
            if node_ready(node) and self.heartbeats.get(name, 0) < deadline:
                for condition in node["status"]["conditions"]:
                    if condition["type"] == "Ready":
                        condition.update(
                            status="Unknown", reason="NodeStatusUnknown", message="Kubelet stopped posting node status."
                        )
                self._stamp(BY_PATH[("", "v1", "nodes")], node)
                self.objects[("", "nodes", "", name)] = node


def grace_period(options: object, query: dict) -> int | None:
    """The grace period a delete or an eviction asks for (DeleteOptions in the body, or the query)."""
    if isinstance(options, dict):
        inner = options.get("deleteOptions") if options.get("kind") == "Eviction" else options
        if isinstance(inner, dict) and inner.get("gracePeriodSeconds") is not None:
            return int(inner["gracePeriodSeconds"])
    if query.get("gracePeriodSeconds") not in (None, ""):
        return int(query["gracePeriodSeconds"])
    return None


def age(obj: dict) -> str:
    created = datetime.datetime.strptime(obj["metadata"]["creationTimestamp"] + "+0000", "%Y-%m-%dT%H:%M:%SZ%z")
    seconds = int((datetime.datetime.now(datetime.UTC) - created).total_seconds())
    return f"{seconds}s" if seconds < 120 else f"{seconds // 60}m"


def table(resource: Resource, items: list[dict]) -> dict:
    """The server-side printing that ``kubectl get`` asks for (meta.k8s.io Table)."""
    if resource.plural == "nodes":
        columns = ["Name", "Status", "Roles", "Age", "Version"]

        def cells(n: dict) -> list:
            conds = {c["type"]: c["status"] for c in n.get("status", {}).get("conditions", [])}
            status = "Ready" if conds.get("Ready") == "True" else "NotReady" if conds else "Unknown"
            if n.get("spec", {}).get("unschedulable"):
                status += ",SchedulingDisabled"
            roles = sorted(
                k.split("/", 1)[1] for k in n["metadata"].get("labels", {}) if k.startswith("node-role.kubernetes.io/")
            )
            return [
                n["metadata"]["name"],
                status,
                ",".join(roles) or "<none>",
                age(n),
                n.get("status", {}).get("nodeInfo", {}).get("kubeletVersion", ""),
            ]
    elif resource.plural == "pods":
        columns = ["Name", "Ready", "Status", "Restarts", "Age", "Node"]

        def cells(p: dict) -> list:
            return [
                p["metadata"]["name"],
                "1/1" if pod_ready(p) else "0/1",
                "Terminating" if p["metadata"].get("deletionTimestamp") else p.get("status", {}).get("phase", ""),
                0,
                age(p),
                p.get("spec", {}).get("nodeName", ""),
            ]
    else:
        columns = ["Name", "Age"]

        def cells(o: dict) -> list:
            return [o["metadata"]["name"], age(o)]

    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {},
        "columnDefinitions": [
            {"name": c, "type": "string", "format": "name" if c == "Name" else "", "description": c, "priority": 0}
            for c in columns
        ],
        "rows": [{"cells": cells(o), "object": o} for o in items],
    }


# What a client meets for each transient status (real-engines.md, "The API server and etcd": 429 under
# load, 500/503 during etcd leader changes and right after an apiserver start). The bodies are
# kube-apiserver's own: k8s.io/apiserver's max-in-flight and priority-and-fairness filters answer 429 in
# plain text with a Retry-After header (filters/maxinflight.go tooManyRequests); etcd's errors come back
# as InternalError Status objects; 503 is a starting apiserver's and the aggregator's; 504 is the request
# timeout filter's. 502 is never kube-apiserver's: it is a load balancer's in front of the servers.
FAULT_ANSWERS = {
    429: ("text/plain", "Too many requests, please try again later.\n"),
    500: ("application/json", ("InternalError", "Internal error occurred: etcdserver: leader changed")),
    502: ("text/plain", "Bad Gateway\n"),
    503: ("application/json", ("ServiceUnavailable", "the server is currently unable to handle the request")),
    504: (
        "application/json",
        ("Timeout", "Timeout: request did not complete within requested timeout - context deadline exceeded"),
    ),
    # And the definite answers a client must not retry, as kube-apiserver words them: an unauthenticated
    # request where anonymous access is off (k8s.io/apiserver endpoints/filters/authentication.go, which
    # answers apierrors.NewUnauthorized("Unauthorized")), RBAC's refusal
    # (k8s.io/apiserver endpoints/handlers/responsewriters/errors.go, "forbidden"), an update on a stale
    # object (apimachinery's NewConflict), a body the validation refuses (NewInvalid).
    401: ("application/json", ("Unauthorized", "Unauthorized")),
    403: (
        "application/json",
        (
            "Forbidden",
            'nodes is forbidden: User "lab-operator" cannot patch resource "nodes" in API group "" at the cluster scope',
        ),
    ),
    409: (
        "application/json",
        (
            "Conflict",
            "Operation cannot be fulfilled: the object has been modified; please apply your changes to the latest version and try again",
        ),
    ),
    422: ("application/json", ("Invalid", "the object is invalid: spec: Invalid value")),
}
FAULT_KINDS = ("status", "reset", "slow")


class Faults:
    """The faults a test switched on (``POST /lab/faults``), each with its own end and hit count."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.active: list[dict] = []

    def set(self, faults: list) -> list[dict]:
        now, checked = time.monotonic(), []
        for fault in faults:
            kind = fault.get("kind")
            if kind not in FAULT_KINDS:
                raise ApiError(400, "BadRequest", f"a fault's kind is one of {', '.join(FAULT_KINDS)}, not {kind!r}")
            if kind == "status" and int(fault.get("status", 0)) not in FAULT_ANSWERS:
                raise ApiError(400, "BadRequest", f"a status fault answers one of {sorted(FAULT_ANSWERS)}")
            entry = {
                "kind": kind,
                "status": int(fault.get("status", 0)),
                "retry_after": int(fault.get("retry_after", 1)),
                "delay": float(fault.get("delay", 0)),
                "paths": list(fault.get("paths") or ["/"]),
                "methods": [m.upper() for m in fault.get("methods") or []],
                "users": list(fault.get("users") or []),
                "until": now + float(fault["seconds"]) if fault.get("seconds") is not None else None,
                "left": int(fault["count"]) if fault.get("count") is not None else None,
                "hits": 0,
            }
            checked.append(entry)
        with self.lock:
            self.active = checked
        return self.listed()

    @staticmethod
    def live(fault: dict, now: float) -> bool:
        """Whether the fault still has time and requests left."""
        return (fault["until"] is None or now < fault["until"]) and (fault["left"] is None or fault["left"] > 0)

    def listed(self) -> list[dict]:
        now = time.monotonic()
        with self.lock:
            return [
                {
                    **{k: v for k, v in f.items() if k != "until"},
                    "seconds_left": None if f["until"] is None else max(0.0, f["until"] - now),
                    "live": self.live(f, now),
                }
                for f in self.active
            ]

    def meet(self, method: str, path: str, user: str | None) -> dict | None:
        """The fault this request (from ``user``, None for an unknown caller) meets, counted; None to answer
        it as usual."""
        if path.startswith("/lab/"):
            return None
        now = time.monotonic()
        with self.lock:
            for fault in self.active:
                if not self.live(fault, now):
                    continue
                if not any(path.startswith(prefix) for prefix in fault["paths"]):
                    continue
                if fault["methods"] and method not in fault["methods"]:
                    continue
                if fault["users"] and user not in fault["users"]:
                    continue
                if fault["left"] is not None:
                    fault["left"] -= 1
                fault["hits"] += 1
                return dict(fault)
        return None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "cargoship-kube-double/1"
    store: Store
    token: str
    node_token: str = ""
    faults: Faults

    def log_message(self, format: str, *args: object) -> None:
        pass

    def send_json(self, code: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def read_body(self) -> object:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return {}
        try:
            return json.loads(raw)
        except ValueError as exc:
            if "yaml" in (self.headers.get("Content-Type") or ""):
                raise ApiError(415, "UnsupportedMediaType", "YAML bodies are not served by the lab API double") from exc
            raise ApiError(400, "BadRequest", f"invalid JSON body: {exc}") from exc

    def send_fault(self, fault: dict) -> bool:
        """Fail this request as the fault says; False when it is only late and is then answered."""
        if fault["kind"] == "slow":
            time.sleep(fault["delay"])
            return False
        if fault["kind"] == "reset":
            # Dropped with a TCP reset, as a dying apiserver or a load balancer drops it: no answer at all.
            self.close_connection = True
            try:
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            except OSError:
                pass
            return True
        content_type, answer = FAULT_ANSWERS[fault["status"]]
        if content_type == "application/json":
            reason, message = answer
            data = json.dumps(
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Failure",
                    "message": message,
                    "reason": reason,
                    "code": fault["status"],
                }
            ).encode()
        else:
            data = answer.encode()
        self.send_response(fault["status"])
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        if fault["status"] == 429:
            self.send_header("Retry-After", str(fault["retry_after"]))
        self.end_headers()
        self.wfile.write(data)
        return True

    def caller(self) -> str | None:
        """Who the request comes from, by its bearer token: the operator, a kubelet, or nobody known."""
        given = self.headers.get("Authorization", "")
        if hmac.compare_digest(given, f"Bearer {self.token}"):
            return OPERATOR
        if self.node_token and hmac.compare_digest(given, f"Bearer {self.node_token}"):
            return KUBELETS
        return None

    def dispatch(self, method: str) -> None:
        try:
            url = urllib.parse.urlsplit(self.path)
            user = self.caller()
            fault = self.faults.meet(method, url.path, user)
            if fault is not None and self.send_fault(fault):
                return
            # Like a real apiserver, health and version answer anonymous callers; the rest needs a credential.
            if url.path not in ANONYMOUS_PATHS and user is None:
                raise ApiError(401, "Unauthorized", "Unauthorized")
            query = {k: v[-1] for k, v in urllib.parse.parse_qs(url.query).items()}
            code, body = self.route(method, [p for p in url.path.split("/") if p], query)
            self.send_json(code, body)
        except ApiError as exc:
            self.send_json(exc.code, exc.status())
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            self.send_json(400, ApiError(400, "BadRequest", f"bad request: {exc}").status())

    def do_GET(self) -> None:
        self.dispatch("GET")

    def do_POST(self) -> None:
        self.dispatch("POST")

    def do_PUT(self) -> None:
        self.dispatch("PUT")

    def do_PATCH(self) -> None:
        self.dispatch("PATCH")

    def do_DELETE(self) -> None:
        self.dispatch("DELETE")

    def route(self, method: str, parts: list[str], query: dict) -> tuple[int, dict]:
        if parts == ["lab", "faults"]:
            if method == "POST":
                return 200, {"faults": self.faults.set(list(self.read_body().get("faults") or []))}
            return 200, {"faults": self.faults.listed()}
        if parts == ["lab", "node-grace"] and method == "POST":
            seconds = float(self.read_body()["seconds"])
            with self.store.lock:
                self.store.node_grace = seconds
            return 200, {"seconds": seconds}
        if parts == ["version"]:
            return 200, {"major": "1", "minor": "30", "gitVersion": "v1.30.2+lab", "platform": "linux/amd64"}
        if parts == ["lab", "learner"] and method == "GET":
            with self.store.lock:
                return 200, {
                    "armed": dict(self.store.learner_armed),
                    "learners": sorted(self.store.promoted_at),
                    "promoted": list(self.store.promotions),
                }
        if parts == ["lab", "learner"] and method == "POST":
            # {"node": n, "seconds": s}: n's member rejoins as a learner at its next start and stays one
            # for s seconds; with "now": true it is one from now on (for s seconds).
            body = self.read_body()
            name, seconds = str(body["node"]), float(body["seconds"])
            with self.store.lock:
                if seconds <= 0:
                    # Disarmed; a member that is a learner now is promoted at the controllers' next pass.
                    self.store.learner_armed.pop(name, None)
                    if name in self.store.promoted_at:
                        self.store.promoted_at[name] = 0.0
                    return 200, {"node": name, "seconds": 0}
                self.store.learner_armed[name] = seconds
                if body.get("now"):
                    node = self.store.objects.get(("", "nodes", "", name))
                    if node is None:
                        raise ApiError(404, "NotFound", f'nodes "{name}" not found')
                    self.store._hold_as_learner(node, name)
                    self.store.learner_armed.pop(name, None)
                    self.store._stamp(BY_PATH[("", "v1", "nodes")], node)
            return 200, {"node": name, "seconds": seconds}
        if parts == ["lab", "etcd-healthy"] and method == "POST":
            self.store.etcd_healthy = bool(self.read_body()["healthy"])
            return 200, {"healthy": self.store.etcd_healthy}
        if parts == ["readyz", "etcd"]:
            # As kube-apiserver's readiness check of its etcd (k3s/RKE2 with embedded etcd).
            if not self.store.etcd_healthy:
                raise ApiError(500, "InternalError", "[-]etcd failed: reason withheld")
            return 200, {"status": "ok"}
        if parts in (["healthz"], ["readyz"], ["livez"]):
            return 200, {"status": "ok"}
        if parts == ["api"]:
            return 200, {
                "kind": "APIVersions",
                "versions": ["v1"],
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": ""}],
            }
        if parts == ["apis"]:
            return 200, self.group_list()
        if parts and parts[0] == "openapi":
            raise ApiError(404, "NotFound", "the lab API double serves no OpenAPI document")
        if parts[:1] == ["api"] and len(parts) >= 2:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 3:
            group, version, rest = parts[1], parts[2], parts[3:]
        elif parts[:1] == ["apis"] and len(parts) == 2:
            return 200, next(g for g in self.group_list()["groups"] if g["name"] == parts[1])
        else:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if not rest:
            return 200, self.resource_list(group, version)
        namespace = None
        if rest[0] == "namespaces" and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        resource = BY_PATH.get((group, version, rest[0]))
        if resource is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        name = rest[1] if len(rest) > 1 else None
        subresource = rest[2] if len(rest) > 2 else ""
        return self.serve(method, resource, namespace, name, subresource, query)

    def serve(
        self, method: str, resource: Resource, namespace: str | None, name: str | None, subresource: str, query: dict
    ) -> tuple[int, dict]:
        store = self.store
        ns = (namespace or "default") if resource.namespaced else ""
        if name is None:
            if method == "GET":
                if query.get("watch") in ("true", "1"):
                    raise ApiError(405, "MethodNotAllowed", "watch is not served by the lab API double")
                items = store.list(
                    resource,
                    namespace if resource.namespaced else None,
                    query.get("labelSelector", ""),
                    query.get("fieldSelector", ""),
                )
                if "as=Table" in (self.headers.get("Accept") or ""):
                    return 200, table(resource, items)
                return 200, {
                    "kind": f"{resource.kind}List",
                    "apiVersion": resource.api_version,
                    "metadata": {"resourceVersion": str(store.revision)},
                    "items": items,
                }
            if method == "POST":
                return 201, store.create(resource, ns, self.read_body())
            raise ApiError(405, "MethodNotAllowed", f"{method} is not allowed on a collection")
        if subresource == "eviction":
            if method != "POST":
                raise ApiError(405, "MethodNotAllowed", "eviction accepts POST only")
            store.evict(ns, name, grace_period(self.read_body(), query))
            return 201, {"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201}
        if method == "GET":
            obj = store.get(resource, ns, name)
            if "as=Table" in (self.headers.get("Accept") or ""):
                return 200, table(resource, [obj])
            return 200, obj
        if method == "PUT":
            return 200, store.replace(resource, ns, name, self.read_body(), subresource)
        if method == "PATCH":
            return 200, store.patch(
                resource, ns, name, self.read_body(), self.headers.get("Content-Type") or "", subresource
            )
        if method == "DELETE":
            options = self.read_body()
            if resource.plural == "pods":
                return 200, store.terminate(ns, name, grace_period(options, query))
            return 200, store.delete(resource, ns, name)
        raise ApiError(405, "MethodNotAllowed", f"{method} is not allowed")

    @staticmethod
    def group_list() -> dict:
        groups: dict[str, list[str]] = {}
        for r in RESOURCES:
            if r.group and r.version not in groups.setdefault(r.group, []):
                groups[r.group].append(r.version)
        return {
            "kind": "APIGroupList",
            "apiVersion": "v1",
            "groups": [
                {
                    "name": g,
                    "versions": [{"groupVersion": f"{g}/{v}", "version": v} for v in vs],
                    "preferredVersion": {"groupVersion": f"{g}/{vs[0]}", "version": vs[0]},
                }
                for g, vs in groups.items()
            ],
        }

    @staticmethod
    def resource_list(group: str, version: str) -> dict:
        entries = []
        for r in RESOURCES:
            if (r.group, r.version) != (group, version):
                continue
            entries.append(
                {
                    "name": r.plural,
                    "singularName": r.kind.lower(),
                    "namespaced": r.namespaced,
                    "kind": r.kind,
                    "shortNames": list(r.short),
                    "verbs": ["create", "delete", "get", "list", "patch", "update"],
                }
            )
            for sub in r.subresources:
                entry = {
                    "name": f"{r.plural}/{sub}",
                    "singularName": "",
                    "namespaced": r.namespaced,
                    "kind": r.kind,
                    "verbs": ["get", "patch", "update"],
                }
                if sub == "eviction":
                    entry.update(kind="Eviction", group="policy", version="v1", verbs=["create"])
                entries.append(entry)
        if not entries:
            raise ApiError(404, "NotFound", f"no resources in {group or 'core'}/{version}")
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": f"{group}/{version}" if group else version,
            "resources": entries,
        }


def controllers(store: Store, stop: threading.Event) -> None:
    while not stop.wait(CONTROLLER_PERIOD_SECONDS):
        store.reconcile()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--listen", required=True, help="HOST:PORT")
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--token-file", required=True)
    parser.add_argument("--node-token-file", help="the kubelets' token (user system:node); none: only the operator's")
    args = parser.parse_args()
    host, port = args.listen.rsplit(":", 1)
    with open(args.token_file, encoding="utf-8") as handle:
        Handler.token = handle.read().strip()
    if args.node_token_file:
        with open(args.node_token_file, encoding="utf-8") as handle:
            Handler.node_token = handle.read().strip()
    Handler.store = Store()
    Handler.faults = Faults()
    server = ThreadingHTTPServer((host, int(port)), Handler)
    server.daemon_threads = True
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(args.cert, args.key)
    # The handshake then happens in each request's own thread, not in the accept loop.
    server.socket = context.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
    stop = threading.Event()
    threading.Thread(target=controllers, args=(Handler.store, stop), daemon=True).start()
    print(f"kube double listening on https://{host}:{port}", flush=True)
    try:
        server.serve_forever()
    finally:
        stop.set()


if __name__ == "__main__":
    main()
