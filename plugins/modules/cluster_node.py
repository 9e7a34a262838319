#!/usr/bin/python
# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: cluster_node
short_description: Drain, uncordon, wait for or label one Kubernetes node through the API
version_added: 0.1.0
description:
  - Talks to the Kubernetes API with the Python kubernetes client; run it on the control host
    (C(delegate_to) V(localhost)).
  - V(drained) cordons the node and evicts its pods through the eviction API, so
    PodDisruptionBudgets are respected; a refused eviction (HTTP 429) is retried every
    O(retry_delay) seconds until O(timeout). DaemonSet pods are left alone and emptyDir data may
    be deleted, unless told otherwise.
  - V(ready) waits until the node reports Ready. V(uncordoned) makes it schedulable again.
    V(labeled) sets O(labels) where they are missing or different.
  - A cordon made by V(drained) is marked with the annotation C(cargoship.io/cordoned-by) (the O(owner)).
    V(released), for O(names), uncordons the nodes so marked that are Ready, which an interrupted run
    left cordoned. Nodes cordoned by anyone else are left alone.
  - In check mode nothing is changed; the module reports what it would do.
author:
  - cargoship developers (@cargoship)
extends_documentation_fragment:
  - cargoship.engine._attributes
  - cargoship.engine._attributes.no_diff
requirements:
  - kubernetes (Python client)
options:
  name:
    description: The node. One of O(name) and O(names) is required.
    type: str
  names:
    description:
      - Several nodes at once, with one API client. With O(state=ready), waits until all are Ready.
        With O(state=drained), only in check mode, assesses what draining each would do (RV(by_node)).
    type: list
    elements: str
  state:
    description: What to make true of the node.
    type: str
    required: true
    choices: [drained, uncordoned, ready, labeled, released]
  kubeconfig:
    description: Path of the kubeconfig on the control host.
    type: path
    required: true
  timeout:
    description: Seconds to wait for the drain or for Ready before failing.
    type: int
    default: 300
  retry_delay:
    description: Seconds between attempts at an eviction a PodDisruptionBudget refused.
    type: int
    default: 5
  ignore_daemonsets:
    description: Leave DaemonSet pods on the node (they would be recreated at once anyway).
    type: bool
    default: true
  delete_emptydir_data:
    description: Evict pods that use emptyDir volumes (their data is lost).
    type: bool
    default: true
  owner:
    description:
      - Who cordons the node (the run id), written into the cordon's annotation by V(drained).
      - With V(uncordoned) and an owner, only a cordon marked by a cargoship run is lifted (this one's, or
        that of an earlier run that lost the node; the host lock rules out a concurrent one). A cordon
        someone else made stays.
    type: str
  labels:
    description: Labels to set with V(labeled).
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: Drain a worker before restarting its engine
  cargoship.engine.cluster_node:
    name: w1
    state: drained
    kubeconfig: ~/.kube/config
    timeout: 600
  delegate_to: localhost

- name: Label a node with its profile
  cargoship.engine.cluster_node:
    name: w1
    state: labeled
    kubeconfig: ~/.kube/config
    labels:
      node-role.kubernetes.io/infrastructure: "true"
  delegate_to: localhost
"""

RETURN = r"""
changes:
  description: What was (or in check mode would be) done, e.g. C(cordon), C(evict default/web-1), C(uncordon), C(label k=v).
  returned: always
  type: list
  elements: str
ready:
  description: Whether the node (with O(names), every node) is Ready at the end.
  returned: with O(name), or O(names) and O(state=ready)
  type: bool
by_node:
  description: With O(names), each node's changes a drain would make.
  returned: with O(names)
  type: dict
"""

import time
import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

try:
    from kubernetes import client, config
    from kubernetes.client.rest import ApiException

    HAS_KUBERNETES = True
    IMPORT_ERROR = None
except ImportError:
    HAS_KUBERNETES = False
    IMPORT_ERROR = traceback.format_exc()


CORDONED_BY = "cargoship.io/cordoned-by"
UNCORDON = {"spec": {"unschedulable": None}, "metadata": {"annotations": {CORDONED_BY: None}}}


def is_ready(node) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in (node.status.conditions or []))


def pods_to_evict(core, module: AnsibleModule, name: str) -> list:
    p = module.params
    pods = core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={name}").items
    chosen = []
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
        chosen.append(pod)
    return chosen


def release(core, module: AnsibleModule) -> None:
    """Uncordon the nodes of ``names`` that a cargoship run cordoned and left so (it was interrupted) and
    that are Ready again. A node cordoned by anyone else is left alone."""
    changes = []
    for name in module.params["names"]:
        node = core.read_node(name)
        owner = (node.metadata.annotations or {}).get(CORDONED_BY)
        if owner and node.spec.unschedulable and is_ready(node):
            changes.append(f"uncordon {name} (left cordoned by run {owner})")
            if not module.check_mode:
                core.patch_node(name, UNCORDON)
    module.exit_json(changed=bool(changes), changes=changes)


def drain(core, module: AnsibleModule, node) -> list[str]:
    p = module.params
    changes = [] if node.spec.unschedulable else ["cordon"]
    pods = pods_to_evict(core, module, node.metadata.name)
    changes += [f"evict {pod.metadata.namespace}/{pod.metadata.name}" for pod in pods]
    if module.check_mode:
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
            body = client.V1Eviction(metadata=client.V1ObjectMeta(name=name, namespace=namespace))
            try:
                core.create_namespaced_pod_eviction(name, namespace, body)
            except ApiException as exc:
                if exc.status == 404:
                    pending.pop((namespace, name))
                    continue
                if exc.status == 429:
                    refusals[(namespace, name)] = "a PodDisruptionBudget does not allow it yet"
                    continue
                raise
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
    wait_until(
        module, lambda: all(pod_gone(core, pod) for pod in pods), f"evicted pods of {p['name']} to terminate", deadline
    )
    return changes


def pod_gone(core, pod) -> bool:
    try:
        current = core.read_namespaced_pod(pod.metadata.name, pod.metadata.namespace)
    except ApiException as exc:
        if exc.status == 404:
            return True
        raise
    return current.metadata.uid != pod.metadata.uid


def wait_until(module: AnsibleModule, condition, what: str, deadline: float) -> None:
    while not condition():
        if time.monotonic() > deadline:
            module.fail_json(msg=f"timed out waiting for {what}")
        time.sleep(1)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "name": {"type": "str"},
            "names": {"type": "list", "elements": "str"},
            "state": {
                "type": "str",
                "required": True,
                "choices": ["drained", "uncordoned", "ready", "labeled", "released"],
            },
            "owner": {"type": "str"},
            "kubeconfig": {"type": "path", "required": True},
            "timeout": {"type": "int", "default": 300},
            "retry_delay": {"type": "int", "default": 5},
            "ignore_daemonsets": {"type": "bool", "default": True},
            "delete_emptydir_data": {"type": "bool", "default": True},
            "labels": {"type": "dict", "default": {}},
        },
        required_one_of=[("name", "names")],
        mutually_exclusive=[("name", "names")],
        supports_check_mode=True,
    )
    if not HAS_KUBERNETES:
        module.fail_json(msg=missing_required_lib("kubernetes"), exception=IMPORT_ERROR)
    p = module.params
    several = p["names"] is not None
    if several:
        usable = p["state"] in ("ready", "released") or (p["state"] == "drained" and module.check_mode)
        if not usable:
            module.fail_json(msg="names is for ready, released, or assessing drains in check mode")
    elif p["state"] == "released":
        module.fail_json(msg="released works on names")
    try:
        core = client.CoreV1Api(config.new_client_from_config(p["kubeconfig"]))
        if p["names"] is not None and p["state"] == "drained":
            by_node = {name: drain(core, module, core.read_node(name)) for name in p["names"]}
            module.exit_json(changed=any(by_node.values()), by_node=by_node)
        if p["names"] is not None and p["state"] == "released":
            release(core, module)
        if p["names"] is not None:
            deadline = time.monotonic() + p["timeout"]

            def all_ready() -> bool:
                return all(is_ready(core.read_node(name)) for name in p["names"])

            if not module.check_mode:
                wait_until(module, all_ready, f"nodes {', '.join(p['names'])} to be Ready", deadline)
            module.exit_json(changed=False, ready=all_ready())
        node = core.read_node(p["name"])
    except ApiException as exc:
        module.fail_json(msg=f"cannot read node {p['name']}: {exc.status} {exc.reason}")
    except Exception as exc:  # the client raises many kinds for an unusable kubeconfig or API
        module.fail_json(
            msg=f"cannot reach the Kubernetes API with {p['kubeconfig']}: {exc}", exception=traceback.format_exc()
        )

    changes: list[str] = []
    try:
        if p["state"] == "drained":
            changes = drain(core, module, node)
        elif p["state"] == "uncordoned":
            marked_by = (node.metadata.annotations or {}).get(CORDONED_BY)
            # With an owner, lift only a cargoship run's cordon (this run's, or one a lost run left): a node
            # someone cordoned for their own reasons stays so.
            ours = p["owner"] is None or marked_by is not None
            if node.spec.unschedulable and ours:
                changes = ["uncordon"]
                if not module.check_mode:
                    core.patch_node(p["name"], UNCORDON)
        elif p["state"] == "ready":
            if not module.check_mode:
                deadline = time.monotonic() + p["timeout"]
                wait_until(
                    module, lambda: is_ready(core.read_node(p["name"])), f"node {p['name']} to be Ready", deadline
                )
        else:
            current = node.metadata.labels or {}
            wanted = {k: str(v) for k, v in p["labels"].items() if current.get(k) != str(v)}
            changes = [f"label {k}={v}" for k, v in sorted(wanted.items())]
            if wanted and not module.check_mode:
                core.patch_node(p["name"], {"metadata": {"labels": wanted}})
    except ApiException as exc:
        module.fail_json(
            msg=f"Kubernetes API refused {p['state']} of {p['name']}: {exc.status} {exc.reason}", changes=changes
        )
    ready = is_ready(core.read_node(p["name"])) if not module.check_mode else is_ready(node)
    module.exit_json(changed=bool(changes), changes=changes, ready=ready)


if __name__ == "__main__":
    main()
