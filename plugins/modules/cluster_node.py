#!/usr/bin/python
# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: cluster_node
short_description: Drain, uncordon, wait for or label one Kubernetes node through the API
version_added: 0.1.0
description:
  - Talks to the Kubernetes API over HTTPS (with the Python kubernetes client only where the credentials need
    it), from the control host. It is an action plugin, which runs in the task's own process there,
    whatever host the task is for.
  - V(drained) cordons the node and evicts its pods through the eviction API, so
    PodDisruptionBudgets are respected; a refused eviction (HTTP 429) is retried every
    O(retry_delay) seconds until O(timeout). DaemonSet and mirror (static) pods are left alone and
    emptyDir data may be deleted, unless told otherwise. Evicted pods terminate over their grace
    period; the drain is done when they are gone. On a node whose kubelet is down (its Lease not renewed
    within O(fresh_within) seconds) nothing can finish them until an engine runs there again, so the drain
    is done once they are evicted (their replacements are scheduled elsewhere) and says so.
  - V(ready) waits until the node reports Ready. With O(restarted_after), a Ready status is believed only
    from a kubelet that runs since then. A stopped kubelet posts nothing, so the node shows its old
    Ready=True until the node lifecycle controller's grace period (40 s or more) ends. Proof of a new
    kubelet is a renewal of the node's Lease in C(kube-node-lease) later than O(restarted_after) and a Ready
    status posted no earlier. Both times are the node's own clock (the kubelet writes them, the stop
    time comes from the same host), so the control host's clock plays no part.
  - V(drained) with O(only_if_safe_to_stop=true), for a controller, first makes the check of V(safe_to_stop)
    and fails before the node is touched (not even cordoned) if the cluster cannot lose it; one call
    instead of two, just before the drain.
  - V(uncordoned) makes it schedulable again. V(ready) with O(uncordon=true) does both, once the node is
    Ready, it is made schedulable (as V(uncordoned) would, O(owner) included), in the same call.
  - V(safe_to_stop), for a controller O(name), checks that the cluster can lose O(name) for a while. The
    members counted are the nodes labelled C(node-role.kubernetes.io/control-plane) or
    C(node-role.kubernetes.io/etcd) (etcd-only members too) and any of O(names). Every other member must be
    Ready with a fresh kubelet (its Lease renewed within O(fresh_within) seconds, since a stopped kubelet
    leaves its old Ready behind) and an etcd voter (the node condition C(EtcdIsVoter) that k3s and RKE2 set;
    a member that rejoined after a restart is a learner for a while); the API server of every other
    controller must answer C(/readyz) at its InternalIP and O(api_port); and the API server's etcd check
    (C(/readyz/etcd)) must pass where the cluster has one. Where O(name) is an etcd member, the healthy voters
    left without it must be a majority of the members (a quorum), so a cluster of two members cannot lose either
    without its API becoming unavailable, and is refused unless O(allow_quorum_loss). A member that is down refuses at once; a learner
    or an API server that is still starting is waited for, up to O(timeout) seconds (not in check mode).
    It fails, naming what is wrong, otherwise. It changes nothing.
    V(labeled) sets O(labels) where they are missing or different.
  - V(known), for O(node_of) (each inventory host's node name), fails unless every node exists and no
    two hosts name one node. It changes nothing.
  - A cordon made by V(drained) is marked with the annotation C(cargoship.io/cordoned-by) (the O(owner)).
    V(released), for O(names), uncordons the nodes so marked that are Ready, which an interrupted run
    left cordoned. Nodes cordoned by anyone else are left alone.
  - Every API call rides through the answers that mean "not yet", which are refused, reset or dropped connections,
    timeouts, and HTTP 429, 500, 502, 503 and 504 (an API server restarting, an etcd leader election,
    priority and fairness under load). It is tried again with backoff (0.25 s doubling to 4 s, or the
    server's C(Retry-After)) until the step's deadline (O(timeout) for V(drained), V(ready) and
    V(safe_to_stop), else 30 s), then fails saying what was asked, how often and the last answer. A
    definite answer (401, 403, 404, 409, 422, an eviction a PodDisruptionBudget refuses) is not retried.
  - In check mode nothing is changed; the module reports what it would do.
author:
  - cargoship developers (@cargoship)
extends_documentation_fragment:
  - cargoship.engine._attributes
  - cargoship.engine._attributes.no_diff
  - cargoship.engine._kube_access
requirements:
  - kubernetes (Python client), for exec and auth-provider credentials, a proxy, merged kubeconfig files or the
    in-cluster account only (a token or a client certificate needs nothing beyond Python)
options:
  name:
    description: The node. Exactly one of O(name), O(names) and O(node_of) is given.
    type: str
  node_of:
    description: With O(state=known), each inventory host mapped to its node name.
    type: dict
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
    choices: [drained, uncordoned, ready, labeled, released, safe_to_stop, known]
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
    description: Evict pods that use emptyDir volumes (their data is lost; the changes say so).
    type: bool
    default: true
  force:
    description:
      - Also evict pods that no controller owns, which nothing recreates. Without it, as with
        C(kubectl drain), a node carrying such a pod is not drained (not even cordoned) and the task fails
        naming the pods; in check mode the refusal is one of the changes.
      - A pod that more than one PodDisruptionBudget covers is refused the same way, with or without
        O(force), since the API server never evicts such a pod.
    type: bool
    default: false
  only_if_safe_to_stop:
    description:
      - With O(state=drained) and O(name), check first, as O(state=safe_to_stop) does, that the cluster can
        lose this controller; if not, fail naming why, with the node untouched.
    type: bool
    default: false
  uncordon:
    description: With O(state=ready) and O(name), make the node schedulable once it is Ready (as V(uncordoned)).
    type: bool
    default: false
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
  fresh_within:
    description:
      - How recent a kubelet's Lease renewal must be, in seconds, for its Ready to count, with
        O(state=safe_to_stop) or O(only_if_safe_to_stop) (the other controllers), with O(state=released)
        (the nodes to give back), and with O(state=drained) (a node whose kubelet is down is not waited for).
      - A kubelet renews its Lease every 10 s, on its own clock; the default leaves room for that and for
        the clock skew that cargoship allows between hosts (C(cargoship_max_clock_skew), 30 s).
    type: int
    default: 45
  kubelet_down:
    description:
      - With O(state=drained), why the node's kubelet is known not to run, completing "the kubelet of NODE", as in
        "does not run, since k3s-agent is inactive" (its engine is down, as the run
        saw it). The drain then does not wait for evicted pods to terminate, as for a kubelet whose Lease is
        stale, which it only shows O(fresh_within) seconds after the kubelet stopped.
    type: str
  allow_quorum_loss:
    description:
      - With O(state=safe_to_stop) or O(only_if_safe_to_stop), let O(name) stop although etcd loses its quorum
        without it (a cluster of two etcd members); the API is unavailable until it is back.
    type: bool
    default: false
  api_port:
    description:
      - The port of the API server on each controller's InternalIP, for the check of every other
        controller's API server with O(state=safe_to_stop) or O(only_if_safe_to_stop). k3s and RKE2 serve it
        on 6443.
    type: int
    default: 6443
  restarted_after:
    description:
      - With O(state=ready) and O(name), the moment the node's engine was stopped, on the node's clock
        (RFC 3339, as M(cargoship.engine.engine_service) returns it as C(stopped_at)). See the description.
    type: str
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
renamed:
  description: With O(state=known), the hosts whose node name differs from their inventory name, and that name.
  returned: with O(state=known)
  type: dict
left_cordoned:
  description:
    - With O(state=known), the hosts' nodes that a cargoship run cordoned and left so (an interrupted run).
    - O(state=released) gives them back once Ready; with none, a run need not ask.
  returned: with O(state=known)
  type: list
  elements: str
  sample: [worker-2]
ready:
  description: Whether the node (with O(names), every node) is Ready at the end.
  returned: with O(name), or O(names) and O(state=ready)
  type: bool
by_node:
  description: With O(names), each node's changes a drain would make.
  returned: with O(names)
  type: dict
node_state:
  description:
    - What the node is like now, for the report and the command that follow a node's sync (V(drained),
      V(ready) or V(uncordoned); V(uncordoned) also for V(ready) with O(uncordon=true)).
  returned: with O(name) and O(state=drained), O(state=ready) (once Ready) or O(state=uncordoned), not in check mode
  type: str
"""

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.cargoship.engine.plugins.module_utils._cluster_node import (
    ARGUMENTS,
    TARGETS,
    run_state,
)


def main() -> None:
    # Ansible runs the action plugin of this name (plugins/action/cluster_node.py), in the task's own process;
    # this module runs the same code (module_utils/_cluster_node.py) where it is called as a module.
    module = AnsibleModule(
        argument_spec=ARGUMENTS,
        required_one_of=[TARGETS],
        mutually_exclusive=[TARGETS],
        supports_check_mode=True,
    )
    module.exit_json(**run_state(module, missing_required_lib))


if __name__ == "__main__":
    main()
