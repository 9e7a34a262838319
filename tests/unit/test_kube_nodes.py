"""The node operations of cluster_node (module_utils/_kube_nodes.py) against the lab's API double, with
the real kubernetes client and no test hosts."""

from __future__ import annotations

import datetime
import time

import pytest

from ansible_collections.cargoship.engine.plugins.module_utils import _kube_nodes as nodes

DEFAULTS = {
    "name": None,
    "names": None,
    "node_of": None,
    "owner": "RUN1",
    "timeout": 5,
    "retry_delay": 1,
    "ignore_daemonsets": True,
    "delete_emptydir_data": True,
    "force": False,
    "labels": {},
    "restarted_after": None,
    "fresh_within": 45,
    "api_port": 6443,
    "allow_quorum_loss": False,
    "uncordon": False,
    "only_if_safe_to_stop": False,
}


class Failed(Exception):
    pass


class Module:
    """What the node operations use of an AnsibleModule: its options, check mode, failing."""

    def __init__(self, check_mode: bool = False, **params):
        self.params, self.check_mode = {**DEFAULTS, **params}, check_mode

    def fail_json(self, msg: str, **_result) -> None:
        raise Failed(msg)

    def warn(self, _message: str) -> None:
        pass


def test_a_drain_cordons_evicts_and_waits_until_the_pods_are_gone(kube):
    kube.node("w1")
    kube.node("w2")  # where the evicted pods can go
    kube.pod("web-1", "w1")
    kube.pod("web-2", "w1")
    result = nodes.drained(kube.product, Module(name="w1"))
    assert result["changes"] == ["cordon", "evict default/web-1", "evict default/web-2"]
    node = kube.core.read_node("w1")
    assert node.spec.unschedulable and node.metadata.annotations[nodes.CORDONED_BY] == "RUN1"
    assert [p.metadata.name for p in kube.core.list_namespaced_pod("default").items] == []


def test_a_pod_without_a_controller_stops_the_drain_before_the_cordon(kube):
    kube.node("w1")
    kube.pod("loner", "w1", owner=None)
    with pytest.raises(Failed, match="default/loner has no controller and would be gone for good"):
        nodes.drained(kube.product, Module(name="w1"))
    assert not kube.core.read_node("w1").spec.unschedulable
    assessed = nodes.drains_assessed(kube.product, Module(check_mode=True, names=["w1"]))
    assert any("no controller" in line for line in assessed["by_node"]["w1"])


def test_ready_counts_only_a_kubelet_started_after_the_stop(kube):
    kube.node("w1")
    stopped = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    # The node still shows Ready=True, but its kubelet has not renewed its Lease since the stop.
    with pytest.raises(Failed, match="has not renewed its Lease since the engine was stopped"):
        nodes.one_ready(kube.product, Module(name="w1", restarted_after=stopped, timeout=2))
    kube.kubelet_alive("w1")
    status = {"status": {"conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": _later_stamp()}]}}
    kube.core.patch_node_status("w1", status)
    assert nodes.one_ready(kube.product, Module(name="w1", restarted_after=stopped))["ready"] is True


def _later_stamp() -> str:
    return (datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_release_gives_back_only_nodes_a_cargoship_run_cordoned_and_that_are_alive(kube):
    for name in ("w1", "w2"):
        kube.node(name)
    kube.core.patch_node(
        "w1", {"spec": {"unschedulable": True}, "metadata": {"annotations": {nodes.CORDONED_BY: "lost-run"}}}
    )
    kube.core.patch_node("w2", {"spec": {"unschedulable": True}})  # someone's own cordon
    result = nodes.release(kube.product, Module(names=["w1", "w2"]))
    assert result["changes"] == ["uncordon w1 (left cordoned by run lost-run)"]
    assert not kube.core.read_node("w1").spec.unschedulable and kube.core.read_node("w2").spec.unschedulable


def test_known_names_hosts_that_are_no_node_and_hosts_that_are_one_node(kube):
    kube.node("c1")
    with pytest.raises(Failed, match="hosts and nodes do not match"):
        nodes.check_known(kube.product, Module(node_of={"c1": "c1", "w9": "ghost"}))
    with pytest.raises(Failed, match="a and b are all node c1"):
        nodes.check_known(kube.product, Module(node_of={"a": "c1", "b": "c1"}))
    assert nodes.check_known(kube.product, Module(node_of={"10.0.0.1": "c1"}))["renamed"] == {"10.0.0.1": "c1"}


def test_known_also_names_the_hosts_nodes_an_interrupted_run_left_cordoned(kube):
    for name in ("c1", "w1", "w2", "other"):
        kube.node(name)
    marked = {"spec": {"unschedulable": True}, "metadata": {"annotations": {nodes.CORDONED_BY: "lost-run"}}}
    kube.core.patch_node("w1", marked)
    kube.core.patch_node("other", marked)  # not a host of this run
    kube.core.patch_node("w2", {"spec": {"unschedulable": True}})  # someone's own cordon
    known = nodes.check_known(kube.product, Module(node_of={"c1": "c1", "w1": "w1", "w2": "w2"}))
    assert known["left_cordoned"] == ["w1"]
    kube.core.patch_node("w1", {"spec": {"unschedulable": None}})  # uncordoned by hand, the mark left behind
    assert nodes.check_known(kube.product, Module(node_of={"w1": "w1"}))["left_cordoned"] == []


def test_a_wait_looks_again_soon_at_first_and_then_less_often(monkeypatch):
    clock, pauses = [100.0], []
    monkeypatch.setattr(nodes.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(nodes.time, "sleep", pauses.append)
    for elapsed in (0, 3, 8, 60):
        clock[0] = 100.0 + elapsed
        nodes.pause(100.0)
    assert pauses == pytest.approx([0.2, 0.5, 1.0, 1.0])


def test_ready_with_uncordon_waits_for_the_new_kubelet_first_and_then_lifts_only_a_runs_cordon(kube):
    kube.node("w1")
    kube.core.patch_node(
        "w1", {"spec": {"unschedulable": True}, "metadata": {"annotations": {nodes.CORDONED_BY: "RUN1"}}}
    )
    stopped = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    # No kubelet since the stop: not Ready, and the cordon stays.
    with pytest.raises(Failed, match="has not renewed its Lease since the engine was stopped"):
        nodes.one_ready(kube.product, Module(name="w1", restarted_after=stopped, timeout=2, uncordon=True))
    assert kube.core.read_node("w1").spec.unschedulable
    kube.kubelet_alive("w1")
    status = {"status": {"conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": _later_stamp()}]}}
    kube.core.patch_node_status("w1", status)
    result = nodes.one_ready(kube.product, Module(name="w1", restarted_after=stopped, uncordon=True))
    assert result["ready"] is True and result["changes"] == ["uncordon"] and result["uncordoned"] is True
    assert not kube.core.read_node("w1").spec.unschedulable
    # A cordon someone else made (no cargoship mark) is theirs: Ready, and left cordoned.
    kube.node("w2")
    kube.core.patch_node("w2", {"spec": {"unschedulable": True}})
    assert nodes.one_ready(kube.product, Module(name="w2", uncordon=True))["changes"] == []
    assert kube.core.read_node("w2").spec.unschedulable


def test_the_drain_assessment_of_a_batch_lists_once_and_names_each_nodes_evictions(kube):
    for name in ("w1", "w2", "w3"):
        kube.node(name)
    kube.pod("web-1", "w1")
    kube.pod("web-2", "w2")
    kube.core.patch_node("w3", {"spec": {"unschedulable": True}})
    assessed = nodes.drains_assessed(kube.product, Module(check_mode=True, names=["w1", "w2", "w3"]))
    assert assessed["by_node"] == {
        "w1": ["cordon", "evict default/web-1"],
        "w2": ["cordon", "evict default/web-2"],
        "w3": [],
    }
    with pytest.raises(Failed, match="node ghost is not in the cluster"):
        nodes.drains_assessed(kube.product, Module(check_mode=True, names=["w1", "ghost"]))


def test_a_controllers_drain_first_checks_that_the_cluster_can_lose_it_and_refuses_untouched(kube):
    for name in ("c1", "c2"):
        kube.node(name, labels={nodes.CONTROL_PLANE: "true"})
    kube.pod("web-1", "c1")
    # c2's kubelet stopped 50 s ago: its node still shows Ready=True, its Lease is stale.
    kube.kubelet_alive("c2", silent_for=50)
    safe = {"name": "c1", "only_if_safe_to_stop": True, "api_port": kube.port}
    with pytest.raises(Failed, match="not stopping c1: controller c2 shows Ready but its kubelet last renewed"):
        nodes.drained(kube.product, Module(**safe))
    kube.kubelet_alive("c2")
    kube.store.etcd_healthy = False
    with pytest.raises(Failed, match="not stopping c1: the API server's etcd check fails"):
        nodes.drained(kube.product, Module(**safe, timeout=1))
    # Refused before the node was touched: neither cordoned nor drained.
    assert not kube.core.read_node("c1").spec.unschedulable
    assert [p.metadata.name for p in kube.core.list_namespaced_pod("default").items] == ["web-1"]
    # Without the check (a worker's drain) etcd plays no part; with it and a healthy cluster, drained.
    kube.node("w1")
    assert nodes.drained(kube.product, Module(name="w1"))["changes"] == ["cordon"]
    kube.store.etcd_healthy = True
    result = nodes.drained(kube.product, Module(**safe))
    assert result["changes"] == ["cordon", "evict default/web-1"]
    assert kube.core.read_node("c1").spec.unschedulable


def test_a_drain_of_a_node_whose_kubelet_is_down_evicts_and_does_not_wait_for_what_only_a_kubelet_can_finish(kube):
    for name in ("w1", "w2"):
        kube.node(name)
        kube.pod(f"web-{name}", name, grace=30)
    # w2's kubelet stopped 50 s ago (its engine crash-loops): the Ready=True it shows is old.
    kube.kubelet_alive("w2", silent_for=50)
    later = "not waiting for the evicted pods to terminate: the kubelet of w2 last renewed its Lease 5"  # 50 s, 51 s
    # The plan says so for w2 only...
    assessed = nodes.drains_assessed(kube.product, Module(check_mode=True, names=["w1", "w2"]))
    assert assessed["by_node"]["w1"] == ["cordon", "evict default/web-w1"]
    assert assessed["by_node"]["w2"][:2] == ["cordon", "evict default/web-w2"]
    assert assessed["by_node"]["w2"][2].startswith(later)
    # ...as the drain does: the pod is evicted and stays Terminating until a kubelet stops it, and the
    # drain returns well before its timeout instead of failing at it.
    result = nodes.drained(kube.product, Module(name="w2", timeout=20))
    assert result["changes"][:2] == ["cordon", "evict default/web-w2"] and result["changes"][2].startswith(later)
    assert kube.core.read_namespaced_pod("web-w2", "default").metadata.deletion_timestamp is not None
    assert kube.core.read_node("w2").spec.unschedulable
    # A live kubelet's evicted pod is waited for: with its 30 s grace, a 3 s drain times out.
    with pytest.raises(Failed, match="timed out waiting for evicted pods of w1 to terminate"):
        nodes.drained(kube.product, Module(name="w1", timeout=3))


def test_a_drain_of_a_node_whose_engine_the_run_saw_down_does_not_wait_though_its_lease_is_still_fresh(kube):
    # The engine crash-loops since a few seconds: its kubelet's Lease is fresh for up to fresh_within more.
    kube.node("w1")
    kube.node("w2")
    kube.pod("web-w1", "w1", grace=30)
    down = "does not run, since k3s-agent is activating (auto-restart)"
    plan = nodes.drained(kube.product, Module(check_mode=True, name="w1", kubelet_down=down))["changes"]
    assert (
        plan[2]
        == f"not waiting for the evicted pods to terminate: the kubelet of w1 {down}; they terminate once the engine is back"
    )
    result = nodes.drained(kube.product, Module(name="w1", timeout=20, kubelet_down=down))
    assert result["changes"] == plan
    assert kube.core.read_namespaced_pod("web-w1", "default").metadata.deletion_timestamp is not None


def test_etcd_keeps_its_quorum_counted_from_the_members_etcd_only_ones_included(kube):
    """/readyz/etcd passes with 2 of 3 members: the check counts the members itself."""
    kube.node("c1", labels={nodes.CONTROL_PLANE: "true", nodes.ETCD_ROLE: "true"}, voter=True)
    kube.node("c2", labels={nodes.CONTROL_PLANE: "true", nodes.ETCD_ROLE: "true"}, voter=True)
    kube.node("e1", labels={nodes.ETCD_ROLE: "true"}, voter=True)  # etcd-only: no API server
    safe = {"name": "c1", "api_port": kube.port, "timeout": 1}
    assert nodes.check_safe_to_stop(kube.product, Module(**safe)) == {"changed": False, "changes": []}
    kube.kubelet_alive("e1", silent_for=50)
    with pytest.raises(Failed, match="not stopping c1: etcd member e1 shows Ready but its kubelet last renewed"):
        nodes.check_safe_to_stop(kube.product, Module(**safe))


def test_a_learner_holds_the_stop_until_it_is_a_voter_and_refuses_when_it_stays_one(kube):
    for name in ("c1", "c2", "c3"):
        kube.node(name, labels={nodes.CONTROL_PLANE: "true", nodes.ETCD_ROLE: "true"}, voter=True)
    kube.product.request("POST", "/lab/learner", body={"node": "c2", "seconds": 30, "now": True})
    began = time.monotonic()
    with pytest.raises(
        Failed,
        match=r"not stopping c1: controller c2 is not an etcd voter yet \(Node has not been promoted.*\(waited 2 s\)",
    ):
        nodes.check_safe_to_stop(kube.product, Module(name="c1", api_port=kube.port, timeout=2))
    assert time.monotonic() - began >= 2
    # Promoted 2 s from now: the check waits for it and passes.
    kube.product.request("POST", "/lab/learner", body={"node": "c2", "seconds": 2, "now": True})
    kube.store.promoted_at["c2"] = time.monotonic() + 2
    began = time.monotonic()
    nodes.check_safe_to_stop(kube.product, Module(name="c1", api_port=kube.port, timeout=20))
    assert 1.5 <= time.monotonic() - began < 15
    # In check mode nothing is waited for: the learner is reported.
    kube.product.request("POST", "/lab/learner", body={"node": "c2", "seconds": 30, "now": True})
    with pytest.raises(Failed, match="c2 is not an etcd voter yet"):
        nodes.check_safe_to_stop(kube.product, Module(check_mode=True, name="c1", api_port=kube.port, timeout=20))


def test_a_controller_whose_api_server_does_not_answer_refuses_the_stop_of_another(kube):
    for name in ("c1", "c2"):
        kube.node(name, labels={nodes.CONTROL_PLANE: "true"})
    # c2's API server: nothing listens where it should.
    with pytest.raises(
        Failed, match=r"not stopping c1: the API server of c2 at https://127.0.0.1:1 does not answer \(no answer"
    ):
        nodes.check_safe_to_stop(kube.product, Module(name="c1", api_port=1, timeout=30))
    kube.product.request(
        "POST", "/lab/faults", body={"faults": [{"kind": "status", "status": 503, "paths": ["/readyz"], "count": 50}]}
    )
    with pytest.raises(Failed, match=r"the API server of c2 at https://127.0.0.1:\d+ is not ready \(503"):
        nodes.check_safe_to_stop(kube.product, Module(name="c1", api_port=kube.port, timeout=1))


def test_a_member_of_two_is_not_stopped_unless_the_outage_is_accepted(kube):
    for name in ("c1", "c2"):
        kube.node(name, labels={nodes.CONTROL_PLANE: "true", nodes.ETCD_ROLE: "true"}, voter=True)
    safe = {"name": "c1", "api_port": kube.port, "timeout": 1}
    with pytest.raises(
        Failed,
        match=r"etcd has 2 members: without c1, 1 healthy voter is left, fewer than the 2 of a quorum.*cargoship_allow_etcd_quorum_loss",
    ):
        nodes.check_safe_to_stop(kube.product, Module(**safe))
    assert nodes.check_safe_to_stop(kube.product, Module(**safe, allow_quorum_loss=True))["changed"] is False
    # A third member makes one stop safe; a control-plane-only server is not counted.
    kube.node("c3", labels={nodes.CONTROL_PLANE: "true", nodes.ETCD_ROLE: "true"}, voter=True)
    kube.node("c4", labels={nodes.CONTROL_PLANE: "true"})
    assert nodes.check_safe_to_stop(kube.product, Module(**safe))["changed"] is False


def test_another_servers_health_check_gets_credentials_only_where_its_certificate_must_be_the_clusters(kube):
    """The address of another controller's API server comes from its node's status, which that node's
    kubelet writes: the token must not go to whatever address a node reports."""
    from kube_api import ProductApi, product_client

    for name in ("c1", "c2"):
        kube.node(name, labels={nodes.CONTROL_PLANE: "true"})
    unverified = ProductApi(product_client({**kube.access, "ca_cert": None, "validate_certs": False}))
    sent = {}
    for api, pinned in ((kube.product, True), (unverified, False)):
        pool = api.api_client.rest_client.pool_manager
        original = pool.request

        def spy(method, url, headers=None, _original=original, _pinned=pinned, **rest):
            if url.endswith("/readyz"):
                sent[_pinned] = dict(headers or {})
            return _original(method, url, headers=headers, **rest)

        pool.request = spy
        assert nodes.check_safe_to_stop(api, Module(name="c1", api_port=kube.port, timeout=5))["changed"] is False
    assert sent[True].get("authorization", "").startswith("Bearer ")
    assert "authorization" not in {key.lower() for key in sent[False]}
    # Asked without credentials, a server that answers 401 (anonymous access off) answers all the same.
    kube.product.request(
        "POST", "/lab/faults", body={"faults": [{"kind": "status", "status": 401, "paths": ["/readyz"], "count": 5}]}
    )
    assert nodes.check_safe_to_stop(unverified, Module(name="c1", api_port=kube.port, timeout=5))["changed"] is False


def test_an_api_error_names_what_the_state_was_asked_of_in_words():
    from ansible_collections.cargoship.engine.plugins.module_utils._cluster_node import subject

    assert subject({"name": "w1"}, "name") == "node w1"
    assert subject({"names": ["w1", "w2"]}, "names") == "nodes w1, w2"
    assert subject({"node_of": {"c1": "c1"}, "name": None}, "node_of") == "the hosts' nodes"


def test_a_drain_whose_pods_no_other_node_can_take_says_they_wait_pending(kube):
    """A one-node k3s, or every other node cordoned or down: the drain goes on (the engine restart is what was
    asked for), and the dry run and the real run both say what it means for the pods, and what avoids it."""
    kube.node("w1")
    kube.node("w2")
    kube.node("w3", ready=False)
    kube.core.patch_node("w2", {"spec": {"unschedulable": True}})
    kube.pod("web-1", "w1")
    note = (
        "no other node takes pods (each is cordoned or not Ready): the evicted pods wait, Pending, until w1 is back; "
        "with cargoship_restart: in_place the engine restarts without a drain and the pods keep running"
    )
    assessed = nodes.drains_assessed(kube.product, Module(check_mode=True, names=["w1"]))
    assert assessed["by_node"]["w1"] == ["cordon", "evict default/web-1", note]
    assert nodes.drained(kube.product, Module(name="w1"))["changes"] == ["cordon", "evict default/web-1", note]
    # A node with nothing to evict, or with somewhere for its pods to go, says nothing of it.
    assert nodes.drained(kube.product, Module(name="w1"))["changes"] == []
    kube.core.patch_node("w2", {"spec": {"unschedulable": False}})
    kube.pod("web-3", "w3")
    assert (
        note.replace("w1", "w3")
        not in nodes.drained(kube.product, Module(name="w3", timeout=1, kubelet_down="x"))["changes"]
    )
