"""The API double must agree with the real API where cargoship relies on it."""

from __future__ import annotations

import http.client
import json
import ssl

import kube_double as kd
import pytest


@pytest.fixture
def store():
    return kd.Store()


def pods():
    return kd.BY_PATH[("", "v1", "pods")]


def pdbs():
    return kd.BY_PATH[("policy", "v1", "poddisruptionbudgets")]


def add_pod(store, name, node, app="web", ready=True, owner=None):
    meta = {"name": name, "labels": {"app": app}}
    if owner:
        meta["ownerReferences"] = [{"kind": owner["kind"], "name": owner["metadata"]["name"], "controller": True}]
    store.create(pods(), "default", {"metadata": meta, "spec": {"nodeName": node}})
    if not ready:
        store.patch(pods(), "default", name, {"status": {"phase": "Pending"}}, "application/merge-patch+json")


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ("app=web", {"app": "web"}, True),
        ("app=web", {"app": "db"}, False),
        ("app!=web", {"app": "db"}, True),
        ("tier", {"tier": "x"}, True),
        ("!tier", {"tier": "x"}, False),
        ("app in (web,db),tier", {"app": "db", "tier": "1"}, True),
        ("app notin (web)", {"app": "web"}, False),
    ],
)
def test_label_selectors(selector, labels, expected):
    assert kd.labels_match(labels, kd.parse_label_selector(selector)) is expected


def test_field_selector_by_node_name(store):
    add_pod(store, "a", "n1")
    add_pod(store, "b", "n2")
    found = store.list(pods(), None, fields="spec.nodeName=n1")
    assert [p["metadata"]["name"] for p in found] == ["a"]


def test_merge_patch_null_removes_and_nested_merges():
    assert kd.merge_patch({"spec": {"unschedulable": True, "x": 1}}, {"spec": {"unschedulable": None}}) == {
        "spec": {"x": 1}
    }


def test_json_patch_add_and_remove():
    doc = {"metadata": {"labels": {"a": "1"}}}
    doc = kd.json_patch(doc, [{"op": "add", "path": "/metadata/labels/b~1c", "value": "2"}])
    doc = kd.json_patch(doc, [{"op": "remove", "path": "/metadata/labels/a"}])
    assert doc == {"metadata": {"labels": {"b/c": "2"}}}


def test_eviction_refused_with_429_while_budget_allows_no_disruption(store):
    for index in range(3):
        add_pod(store, f"web-{index}", f"n{index}")
    store.create(
        pdbs(),
        "default",
        {"metadata": {"name": "web"}, "spec": {"minAvailable": 3, "selector": {"matchLabels": {"app": "web"}}}},
    )
    with pytest.raises(kd.ApiError) as refused:
        store.evict("default", "web-0")
    assert refused.value.code == 429
    assert refused.value.details["causes"][0]["reason"] == "DisruptionBudget"
    assert store.get(pods(), "default", "web-0")


def test_eviction_allowed_within_budget_marks_the_pod_terminating(store):
    rs = store.create(
        kd.BY_PATH[("apps", "v1", "replicasets")], "default", {"metadata": {"name": "web"}, "spec": {"replicas": 3}}
    )
    for index in range(3):
        add_pod(store, f"web-{index}", f"n{index}", owner=rs)
    store.create(
        pdbs(),
        "default",
        {"metadata": {"name": "web"}, "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}}},
    )
    store.evict("default", "web-0")
    evicted = store.get(pods(), "default", "web-0")
    assert evicted["metadata"]["deletionGracePeriodSeconds"] == kd.POD_GRACE_SECONDS
    assert evicted["metadata"]["deletionTimestamp"]
    # One terminating and not yet replaced: a second disruption would exceed maxUnavailable=1.
    with pytest.raises(kd.ApiError) as refused:
        store.evict("default", "web-1")
    assert refused.value.code == 429
    store.evict("default", "web-0")  # evicting a terminating pod again is accepted, budget or not


def node(store, name, ready=True):
    store.create(
        kd.BY_PATH[("", "v1", "nodes")],
        "",
        {"metadata": {"name": name}, "status": {"conditions": [{"type": "Ready", "status": str(ready)}]}},
    )


def test_a_terminating_pod_goes_after_its_grace_period_only_while_its_kubelet_is_alive(store):
    node(store, "n1")
    node(store, "n2")
    for name, where in (("a", "n1"), ("b", "n2")):
        store.create(
            pods(),
            "default",
            {"metadata": {"name": name}, "spec": {"nodeName": where, "terminationGracePeriodSeconds": 5}},
        )
        store.terminate("default", name)
    store.reconcile()
    assert len(store.list(pods(), "default")) == 2, "gone before the grace period ended"
    for key, (uid, _ends) in list(store.terminating.items()):
        store.terminating[key] = (uid, 0.0)
    store.heartbeats["n2"] -= kd.NODE_GRACE_SECONDS + 1  # n2's kubelet stopped: nobody stops its pod
    store.reconcile()
    remaining = store.list(pods(), "default")
    assert [p["metadata"]["name"] for p in remaining] == ["b"]
    assert remaining[0]["metadata"]["deletionTimestamp"]


def test_a_zero_grace_period_deletes_at_once(store):
    add_pod(store, "a", "n1")
    store.terminate("default", "a", 0)
    assert store.list(pods(), "default") == []


def test_more_than_one_budget_on_a_pod_makes_the_eviction_fail_with_500(store):
    add_pod(store, "web-0", "n0")
    for name in ("one", "two"):
        store.create(
            pdbs(),
            "default",
            {"metadata": {"name": name}, "spec": {"maxUnavailable": 5, "selector": {"matchLabels": {"app": "web"}}}},
        )
    with pytest.raises(kd.ApiError) as failed:
        store.evict("default", "web-0")
    assert failed.value.code == 500
    assert "more than one PodDisruptionBudget" in failed.value.message
    assert not store.get(pods(), "default", "web-0")["metadata"].get("deletionTimestamp")


def test_grace_period_is_read_from_delete_options_and_eviction_bodies():
    assert kd.grace_period({"gracePeriodSeconds": 0}, {}) == 0
    assert kd.grace_period({"kind": "Eviction", "deleteOptions": {"gracePeriodSeconds": 3}}, {}) == 3
    assert kd.grace_period({}, {"gracePeriodSeconds": "7"}) == 7
    assert kd.grace_period({}, {}) is None


def test_percentage_budget_rounds_up_like_the_disruption_controller(store):
    for index in range(3):
        add_pod(store, f"web-{index}", f"n{index}")
    pdb = store.create(
        pdbs(),
        "default",
        {"metadata": {"name": "web"}, "spec": {"minAvailable": "50%", "selector": {"matchLabels": {"app": "web"}}}},
    )
    status = store.pdb_status(pdb)
    assert (status["desiredHealthy"], status["currentHealthy"], status["disruptionsAllowed"]) == (2, 3, 1)


def test_unready_pod_may_always_be_evicted(store):
    add_pod(store, "web-0", "n0", ready=False)
    store.create(
        pdbs(),
        "default",
        {"metadata": {"name": "web"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}},
    )
    store.evict("default", "web-0")
    assert store.get(pods(), "default", "web-0")["metadata"]["deletionTimestamp"]


def test_replicaset_replaces_evicted_pod_on_a_schedulable_ready_node(store):
    nodes = kd.BY_PATH[("", "v1", "nodes")]
    for name, cordoned in (("n1", True), ("n2", False)):
        store.create(
            nodes,
            "",
            {
                "metadata": {"name": name},
                "spec": {"unschedulable": cordoned},
                "status": {"conditions": [{"type": "Ready", "status": "True"}]},
            },
        )
    rs = kd.BY_PATH[("apps", "v1", "replicasets")]
    store.create(rs, "default", {"metadata": {"name": "web"}, "spec": {"replicas": 2, "template": {}}})
    store.reconcile()
    placed = [p["spec"]["nodeName"] for p in store.list(pods(), "default")]
    assert placed == ["n2", "n2"]
    # A terminating pod no longer counts: its replacement is made at once, as the ReplicaSet controller does.
    store.terminate("default", store.list(pods(), "default")[0]["metadata"]["name"])
    store.reconcile()
    live = [p for p in store.list(pods(), "default") if not p["metadata"].get("deletionTimestamp")]
    assert len(live) == 2


def test_a_template_that_names_its_node_binds_the_replicasets_pods_there(store):
    for name in ("n1", "n2"):
        node(store, name)
    rs = kd.BY_PATH[("apps", "v1", "replicasets")]
    store.create(rs, "default", {"metadata": {"name": "web"}, "spec": {"replicas": 2, "template": {}}})
    store.reconcile()
    bound = {"replicas": 1, "template": {"spec": {"nodeName": "n2"}}}
    store.create(rs, "default", {"metadata": {"name": "held"}, "spec": bound})
    store.reconcile()
    placed = sorted((p["metadata"]["name"].split("-")[0], p["spec"]["nodeName"]) for p in store.list(pods(), "default"))
    # The scheduler spread web's two; held's goes where its template says, not to the first of the equals (n1).
    assert placed == [("held", "n2"), ("web", "n1"), ("web", "n2")]
    assert all(kd.pod_ready(p) for p in store.list(pods(), "default"))


def test_a_pod_bound_to_a_node_that_is_not_ready_stays_pending(store):
    node(store, "n1", ready=False)
    rs = kd.BY_PATH[("apps", "v1", "replicasets")]
    store.create(
        rs, "default", {"metadata": {"name": "held"}, "spec": {"replicas": 1, "template": {"spec": {"nodeName": "n1"}}}}
    )
    store.reconcile()
    [pod] = store.list(pods(), "default")
    assert (pod["spec"]["nodeName"], pod["status"]["phase"], kd.pod_ready(pod)) == ("n1", "Pending", False)


def test_node_without_heartbeat_turns_unknown(store):
    nodes = kd.BY_PATH[("", "v1", "nodes")]
    store.create(
        nodes, "", {"metadata": {"name": "n1"}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    )
    store.heartbeats["n1"] -= kd.NODE_GRACE_SECONDS + 1
    store.reconcile()
    assert kd.node_ready(store.get(nodes, "", "n1")) is False


# -- failing as a real API server fails (POST /lab/faults) ---------------------------------------------


def call(kube, method: str, path: str, body: dict | None = None, token: str | None = None) -> tuple[int, dict, str]:
    """One request to the served double, as any client makes it (with the operator's token unless another
    is given): (status, headers, text)."""
    configuration = kube.api_client.configuration
    host, port = configuration.host.split("://", 1)[1].rsplit(":", 1)
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
    connection = http.client.HTTPSConnection(host, int(port), context=context, timeout=10)
    bearer = kube.access["api_key"] if token is None else token
    headers = {"Authorization": f"Bearer {bearer}", "Content-Type": "application/json"}
    try:
        connection.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read().decode()
    finally:
        connection.close()


def faults(kube, *given: dict) -> list[dict]:

    status, _headers, text = call(kube, "POST", "/lab/faults", {"faults": list(given)})
    assert status == 200, text
    return json.loads(text)["faults"]


def test_a_429_is_plain_text_with_retry_after_for_as_many_requests_as_asked(kube):
    faults(kube, {"kind": "status", "status": 429, "retry_after": 3, "count": 2, "paths": ["/api/v1/nodes"]})
    for _attempt in range(2):
        status, headers, text = call(kube, "GET", "/api/v1/nodes")
        assert (status, headers["Retry-After"], headers["Content-Type"]) == (429, "3", "text/plain")
        assert text == "Too many requests, please try again later.\n"
    assert call(kube, "GET", "/api/v1/nodes")[0] == 200
    assert call(kube, "GET", "/api/v1/pods")[0] == 200  # another path: not affected

    listed = json.loads(call(kube, "GET", "/lab/faults")[2])["faults"]
    assert [(f["hits"], f["left"]) for f in listed] == [(2, 0)]


def test_500_and_503_answer_kube_apiservers_status_objects_on_the_paths_and_methods_given(kube):

    kube.node("w1")
    kube.pod("web-1", "w1")
    eviction = "/api/v1/namespaces/default/pods/web-1/eviction"
    faults(
        kube,
        {"kind": "status", "status": 503, "paths": ["/api/v1/nodes"], "seconds": 60},
        {"kind": "status", "status": 500, "paths": [eviction], "methods": ["post"]},
    )
    status, _headers, text = call(kube, "GET", "/api/v1/nodes/w1")
    assert status == 503
    assert json.loads(text)["reason"] == "ServiceUnavailable"
    assert json.loads(text)["message"] == "the server is currently unable to handle the request"
    status, _headers, text = call(kube, "POST", eviction, {"apiVersion": "policy/v1", "kind": "Eviction"})
    assert (status, json.loads(text)["reason"]) == (500, "InternalError")
    assert "etcdserver: leader changed" in json.loads(text)["message"]
    assert call(kube, "GET", "/api/v1/namespaces/default/pods/web-1")[0] == 200  # a GET of the pod is not
    # A fault whose time is over is met no more; the test-bed endpoints themselves never fail.
    faults(kube, {"kind": "status", "status": 503, "seconds": 0})
    assert call(kube, "GET", "/api/v1/nodes/w1")[0] == 200
    faults(kube, {"kind": "status", "status": 503})
    assert call(kube, "GET", "/api/v1/nodes/w1")[0] == 503
    assert faults(kube) == []
    assert call(kube, "GET", "/api/v1/nodes/w1")[0] == 200


def test_a_fault_aimed_at_the_operator_leaves_the_kubelets_own_requests_alone(kube):
    """RBAC refuses a user, not the API server: the operator may not patch nodes, while the kubelets, with
    credentials of their own, still post their nodes' status (a kubelet blocked too would leave its node
    NotReady for as long as the fault lasts, which no real RBAC rule does)."""
    kube.node("w1")
    status_patch = {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    faults(
        kube,
        {"kind": "status", "status": 403, "paths": ["/api/v1/nodes/"], "methods": ["PATCH"], "users": ["lab-operator"]},
    )
    status, _headers, text = call(kube, "PATCH", "/api/v1/nodes/w1", {"spec": {"unschedulable": True}})
    assert status == 403, text
    assert 'User "lab-operator" cannot patch resource "nodes"' in json.loads(text)["message"]
    assert call(kube, "PATCH", "/api/v1/nodes/w1/status", status_patch, token=kube.node_token)[0] == 200
    assert call(kube, "GET", "/api/v1/nodes/w1")[0] == 200  # a read is not refused
    listed = json.loads(call(kube, "GET", "/lab/faults")[2])["faults"]
    assert [f["hits"] for f in listed] == [1], "only the operator's request met the fault"
    # Without users, a fault is the API server's own and every caller meets it; an unknown token is refused.
    faults(kube, {"kind": "status", "status": 503, "paths": ["/api/v1/nodes/"]})
    assert call(kube, "GET", "/api/v1/nodes/w1", token=kube.node_token)[0] == 503
    faults(kube)
    assert call(kube, "GET", "/api/v1/nodes/w1", token="someone-else")[0] == 401


def test_a_reset_drops_the_connection_and_a_slow_answer_still_comes(kube):

    faults(kube, {"kind": "reset", "count": 1})
    with pytest.raises((ConnectionResetError, http.client.RemoteDisconnected, ConnectionAbortedError)):
        call(kube, "GET", "/api/v1/nodes")
    assert call(kube, "GET", "/api/v1/nodes")[0] == 200
    listed = faults(kube, {"kind": "slow", "delay": 0.05, "count": 1})
    assert listed[0]["kind"] == "slow" and listed[0]["live"]
    assert call(kube, "GET", "/api/v1/nodes")[0] == 200  # late, but answered
    after = json.loads(call(kube, "GET", "/lab/faults")[2])["faults"]
    assert [(f["hits"], f["live"]) for f in after] == [(1, False)], "the slow answer did not meet its fault"


def test_a_fault_the_double_cannot_play_is_refused_naming_what_it_can(kube):
    status, _headers, text = call(kube, "POST", "/lab/faults", {"faults": [{"kind": "flaky"}]})
    assert status == 400 and "status, reset, slow" in text
    status, _headers, text = call(kube, "POST", "/lab/faults", {"faults": [{"kind": "status", "status": 418}]})
    assert status == 400 and "[401, 403, 409, 422, 429, 500, 502, 503, 504]" in text


def test_a_node_registered_without_a_status_reads_back_with_an_empty_one(kube):
    """A kubelet's node between its registration and its first status post: kube-apiserver shows ``status``
    (and ``spec``) even then, so a client listing nodes meanwhile never finds None there."""
    status, _headers, text = call(
        kube, "POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}
    )
    assert status == 201, text
    node = json.loads(call(kube, "GET", "/api/v1/nodes/n1")[2])
    assert (node["spec"], node["status"]) == ({}, {})
    listed = kube.core.list_node().items
    assert [(n.metadata.name, n.status.conditions) for n in listed] == [("n1", None)]
