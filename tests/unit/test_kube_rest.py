"""cargoship's REST client of the Kubernetes API (module_utils/_kube_rest.py): objects read as the typed
client's models read, refusals raised as the client's ApiException, and no typed API class imported on
the way (that import was most of every cluster_node call's cost)."""

from __future__ import annotations

import datetime
import json
import os
import ssl
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

from ansible_collections.cargoship.engine.plugins.module_utils._kube_access import PlainClient
from ansible_collections.cargoship.engine.plugins.module_utils._kube_rest import ApiException, Resource

REPO = Path(__file__).resolve().parents[2]


def test_an_object_reads_as_the_typed_models_read():
    pod = Resource(
        {
            "metadata": {
                "name": "web-1",
                "labels": {"app.kubernetes.io/name": "web", "tier_x": "a"},
                "ownerReferences": [{"kind": "ReplicaSet", "controller": True}],
                "deletionTimestamp": "2026-12-02T10:00:00Z",
            },
            "spec": {"nodeName": "w1", "volumes": [{"name": "cache", "emptyDir": {}}, {"name": "cfg"}]},
            "status": {"conditions": [{"type": "Ready", "lastHeartbeatTime": "2026-12-02T10:00:01.250000Z"}]},
        }
    )
    assert pod.metadata.name == "web-1" and pod.spec.node_name == "w1"
    # user keys stay as they are, in a dict
    assert pod.metadata.labels == {"app.kubernetes.io/name": "web", "tier_x": "a"}
    assert pod.metadata.owner_references[0].kind == "ReplicaSet" and pod.metadata.owner_references[0].controller
    assert pod.metadata.deletion_timestamp == datetime.datetime(2026, 12, 2, 10, 0, tzinfo=datetime.UTC)
    heartbeat = pod.status.conditions[0].last_heartbeat_time
    assert heartbeat == datetime.datetime(2026, 12, 2, 10, 0, 1, 250000, tzinfo=datetime.UTC)
    # an empty object is there (emptyDir: {}), an absent field is None
    assert [v.empty_dir is not None for v in pod.spec.volumes] == [True, False]
    assert pod.metadata.annotations is None and pod.spec.unschedulable is None


@pytest.mark.parametrize("connection", ["standard library", "kubernetes package"])
def test_calls_go_to_the_api_and_refusals_carry_status_and_message(kube, connection):
    kube.node("w1", labels={"node-role.kubernetes.io/control-plane": "true"})
    kube.node("w2")
    kube.pod("web-1", "w1")
    product = kube.product if connection == "standard library" else kube.package_product
    assert isinstance(product.api_client, PlainClient) is (connection == "standard library")
    assert [n.metadata.name for n in product.list_node().items] == ["w1", "w2"]
    assert [
        n.metadata.name for n in product.list_node(label_selector="node-role.kubernetes.io/control-plane").items
    ] == ["w1"]
    assert [p.metadata.name for p in product.list_pod_for_all_namespaces(field_selector="spec.nodeName=w1").items] == [
        "web-1"
    ]
    assert product.list_pod_for_all_namespaces(field_selector="spec.nodeName=w2").items == []
    renewed = product.read_namespaced_lease("w1", "kube-node-lease").spec.renew_time
    assert isinstance(renewed, datetime.datetime) and renewed.tzinfo is not None

    product.patch_node("w2", {"spec": {"unschedulable": True}, "metadata": {"annotations": {"a/b": "x"}}})
    assert kube.core.read_node("w2").spec.unschedulable and kube.core.read_node("w2").metadata.annotations == {
        "a/b": "x"
    }
    product.patch_node("w2", {"spec": {"unschedulable": None}, "metadata": {"annotations": {"a/b": None}}})
    assert not kube.core.read_node("w2").spec.unschedulable

    product.create_namespaced_pod_eviction("web-1", "default")  # a grace period of 0: gone at once
    assert [p.metadata.name for p in kube.core.list_namespaced_pod("default").items] == []

    with pytest.raises(ApiException) as refused:
        product.read_node("ghost")
    assert refused.value.status == 404 and "ghost" in json.loads(refused.value.body)["message"]
    assert product.get_text("/readyz/etcd")[0] == 200
    product.request("POST", "/lab/etcd-healthy", body={"healthy": False})
    status, text = product.get_text("/readyz/etcd")  # a failed check is read, not raised
    assert status == 500 and "etcd failed" in text


def test_a_node_call_imports_no_typed_api_class(kube, tmp_path):
    """The whole path of a node call (kubeconfig options, client, a read-only check) in a fresh process, as
    Ansible runs a module (cluster_node and helm_chart_configs run in their task's process, where an import
    costs alike): the typed API and model classes stay unimported."""
    kube.node("c1")
    configuration = kube.api_client.configuration
    probe = f"""
import json, sys
from ansible_collections.cargoship.engine.plugins.module_utils._kube_access import api_client
from ansible_collections.cargoship.engine.plugins.module_utils._kube_rest import KubeApi
from ansible_collections.cargoship.engine.plugins.module_utils import _kube_nodes as nodes
from ansible_collections.cargoship.engine.plugins.modules import cluster_node, helm_chart_configs

class Module:
    params = {{"node_of": {{"c1": "c1"}}}}
    check_mode = True
    def fail_json(self, msg, **_):
        raise SystemExit(msg)

client = api_client({{"host": {configuration.host!r}, "api_key": "unit-token", "ca_cert": {configuration.ssl_ca_cert!r}}})
result = nodes.check_known(KubeApi(client), Module())
typed = sorted(m for m in sys.modules if m.startswith(("kubernetes.client.kube.", "kubernetes.client.models.")))
print(json.dumps({{"result": result, "typed": typed, "package": "kubernetes" in sys.modules}}))
"""
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(REPO / ".collections")},
    )
    answer = json.loads(done.stdout)
    assert answer["result"]["changed"] is False
    assert answer["typed"] == []
    # A token needs nothing of the kubernetes package at all: its import alone is 0.15 s of every call.
    assert answer["package"] is False


# -- riding through an API that errs (kube_double's POST /lab/faults) -----------------------------------


def lab_faults(kube, *given: dict) -> None:
    kube.product.request("POST", "/lab/faults", body={"faults": list(given)})


def hits(kube) -> list[int]:
    return [fault["hits"] for fault in kube.product.request("GET", "/lab/faults")["faults"]]


@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_a_transient_status_is_tried_again_until_the_api_answers(kube, status):
    kube.node("w1")
    lab_faults(kube, {"kind": "status", "status": status, "count": 3, "paths": ["/api/v1/nodes"]})
    assert [n.metadata.name for n in kube.product.list_node().items] == ["w1"]
    assert hits(kube) == [3]


def test_dropped_connections_are_tried_again_on_a_new_connection(kube):
    kube.node("w1")
    lab_faults(kube, {"kind": "reset", "count": 2})
    assert kube.product.read_node("w1").metadata.name == "w1"
    assert hits(kube) == [2]


def test_a_429_waits_as_long_as_its_retry_after_says(kube):
    kube.node("w1")
    lab_faults(kube, {"kind": "status", "status": 429, "retry_after": 2, "count": 1})
    began = time.monotonic()
    kube.product.read_node("w1")
    # backoff alone would try again within 0.3 s
    assert time.monotonic() - began >= 1.9 and hits(kube) == [1]


@pytest.mark.parametrize("status", [401, 403, 404, 409, 422])
def test_a_definite_answer_is_raised_at_once(kube, status):
    kube.node("w1")
    if status in (403, 409, 422):
        lab_faults(kube, {"kind": "status", "status": status, "count": 5, "paths": ["/api/v1/nodes"]})
    elif status == 401:
        kube.product.api_client.configuration.token = "wrong"
    began = time.monotonic()
    with pytest.raises(ApiException) as refused:
        kube.product.read_node("ghost" if status == 404 else "w1")
    assert refused.value.status == status and time.monotonic() - began < 1
    if status in (403, 409, 422):
        assert hits(kube) == [1]


def test_an_eviction_a_budget_refuses_is_an_answer_not_a_wait(kube):
    """429 with a Status object from the eviction subresource is a PodDisruptionBudget saying no: the
    drain retries it on its own terms, the REST layer raises it at once."""
    from ansible_collections.cargoship.engine.plugins.module_utils import _kube_rest as rest

    budget_says_no = json.dumps(
        {"kind": "Status", "message": "Cannot evict pod as it would violate the pod's disruption budget."}
    )
    path = "/api/v1/namespaces/default/pods/web-1/eviction"
    assert not rest.transient_answer(path, 429, budget_says_no)
    assert rest.transient_answer(path, 429, "Too many requests, please try again later.\n")
    multiple = json.dumps(
        {
            "kind": "Status",
            "message": "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
        }
    )
    assert not rest.transient_answer(path, 500, multiple)
    assert rest.transient_answer("/api/v1/nodes", 429, budget_says_no)


def test_after_the_deadline_the_error_says_what_was_tried_and_the_last_answer(kube):
    from ansible_collections.cargoship.engine.plugins.module_utils._kube_rest import ApiUnavailable
    from ansible_collections.cargoship.engine.plugins.module_utils._kube_rest import KubeApi as ProductApi

    kube.node("w1")
    lab_faults(kube, {"kind": "status", "status": 503, "seconds": 30})
    api = ProductApi(kube.product.api_client, deadline=time.monotonic() + 2)
    began = time.monotonic()
    with pytest.raises(ApiUnavailable) as unavailable:
        api.read_node("w1")
    assert 1.9 <= time.monotonic() - began < 5
    message = str(unavailable.value)
    assert message.startswith("GET /api/v1/nodes/w1: only transient answers in ")
    assert "the last: 503" in message and "unable to handle the request" in message
    assert hits(kube)[0] >= 3


def test_a_server_that_closes_during_the_tls_handshake_is_tried_again_until_the_deadline():
    """A TCP load balancer in front of API servers that are all down (haproxy or nginx in stream mode, as
    RKE2 and k3s HA set-ups put there) accepts the connection and closes it before the TLS handshake ends:
    the client reads an EOF (ssl.SSLEOFError, whose ``reason`` is a string). It was raised as an
    AttributeError from the retry check, and the run failed at once. Python 3.11.2 (Debian 12's, which
    `make deps` takes) reports the same close as ssl.SSLZeroReturnError, which failed the run at once too."""
    import socket
    import threading

    from ansible_collections.cargoship.engine.plugins.module_utils._kube_access import api_client
    from ansible_collections.cargoship.engine.plugins.module_utils._kube_rest import ApiUnavailable
    from ansible_collections.cargoship.engine.plugins.module_utils._kube_rest import KubeApi as ProductApi

    listener = socket.create_server(("127.0.0.1", 0))
    accepted = []

    def close_each_after_its_hello():
        while True:
            try:
                connection, _peer = listener.accept()
            except OSError:
                return
            accepted.append(1)
            connection.recv(65536)
            connection.shutdown(socket.SHUT_WR)
            time.sleep(0.1)
            connection.close()

    threading.Thread(target=close_each_after_its_hello, daemon=True).start()
    host = f"https://127.0.0.1:{listener.getsockname()[1]}"
    api = ProductApi(api_client({"host": host, "api_key": "t", "validate_certs": False}), deadline=time.monotonic() + 2)
    try:
        with pytest.raises(ApiUnavailable, match=r"no answer \(SSL(EOF|ZeroReturn)Error"):
            api.list_node()
    finally:
        listener.close()
    assert len(accepted) >= 2, "not tried again"


@pytest.mark.parametrize(
    "error",
    [
        ssl.SSLEOFError(8, "EOF occurred in violation of protocol"),
        ssl.SSLZeroReturnError(6, "TLS/SSL connection has been closed (EOF)"),
    ],
    ids=["eof", "zero-return"],
)
def test_a_tls_close_is_transient_as_each_python_reports_it_also_wrapped_by_urllib3(error):
    """Which of the two a close during the handshake raises depends on the Python build (3.11.7 from
    source: SSLEOFError; Debian 12's 3.11.2: SSLZeroReturnError); urllib3 wraps it in a MaxRetryError."""
    from urllib3.exceptions import MaxRetryError, SSLError

    from ansible_collections.cargoship.engine.plugins.module_utils._kube_rest import transient_error

    assert transient_error(error)
    wrapped = MaxRetryError(None, "/api/v1/nodes", reason=SSLError(error))
    assert transient_error(wrapped)
    assert not transient_error(ssl.SSLCertVerificationError(1, "certificate verify failed"))


def test_a_name_that_does_not_resolve_is_not_retried():
    from ansible_collections.cargoship.engine.plugins.module_utils._kube_access import api_client
    from ansible_collections.cargoship.engine.plugins.module_utils._kube_rest import KubeApi as ProductApi

    api = ProductApi(api_client({"host": "https://no-such-host.invalid:6443", "api_key": "t"}))
    began = time.monotonic()
    with pytest.raises(OSError):
        api.list_node()
    assert time.monotonic() - began < 5


def test_a_health_check_of_another_server_is_read_not_retried_for_its_status(kube):
    configuration = kube.product.api_client.configuration
    lab_faults(kube, {"kind": "status", "status": 503, "count": 1, "paths": ["/readyz"]})
    # the same double, named as another server would be: a second kept connection of the pool
    other = configuration.host.replace("127.0.0.1", "localhost")
    assert kube.product.get_text("/readyz", server=other)[0] == 503
    assert kube.product.get_text("/readyz", server=other)[0] == 200


# -- another API server when the kubeconfig's does not answer ----------------------------------------------


def record_requests(api) -> list[str]:
    """The address of every request the client sends from now on (answered or not), in order."""
    sent: list[str] = []
    pool = api.api_client.rest_client.pool_manager
    send = pool.request

    def recorded(method, url, *args, **kwargs):
        sent.append(url.split("/api/", 1)[0])
        return send(method, url, *args, **kwargs)

    pool.request = recorded
    return sent


def test_the_other_servers_keep_the_kubeconfigs_scheme_and_port_and_only_with_a_ca():
    from ansible_collections.cargoship.engine.plugins.module_utils._kube_rest import api_servers

    main = "https://10.0.0.11:6443"
    others = ["10.0.0.11", "c2.example", "fd00::12", "[fd00::13]", ""]
    assert api_servers(main, others, True) == [
        main,
        "https://c2.example:6443",
        "https://[fd00::12]:6443",
        "https://[fd00::13]:6443",
    ]
    # Credentials go only to a server that must prove itself with the kubeconfig's CA.
    assert api_servers(main, others, False) == [main]
    # A server with a path is a proxy in front of the API, not one of its servers.
    assert api_servers("https://proxy.example/k8s/clusters/c-1", others, True) == [
        "https://proxy.example/k8s/clusters/c-1"
    ]


def test_a_server_that_refuses_is_passed_over_for_another_and_the_one_that_answers_is_kept(kube, monkeypatch):
    """An operator's kubeconfig names one server (real-engines.md, "The API server and etcd"); a lost run left
    its engine stopped: the calls go on through another controller's API server, with the same CA and token."""
    from ansible_collections.cargoship.engine.plugins.module_utils import _kube_rest as kube_rest
    from ansible_collections.cargoship.engine.plugins.module_utils._kube_access import api_client
    from ansible_collections.cargoship.engine.plugins.module_utils._kube_rest import KubeApi as ProductApi

    kube.node("c2")
    # Nothing listens on 127.0.0.2: its connections are refused, as a stopped server's :6443 is.
    down = {**kube.access, "host": f"https://127.0.0.2:{kube.port}"}
    api = ProductApi(api_client({**down, "fallback_hosts": ["127.0.0.1"]}), deadline=time.monotonic() + 10)
    sent = record_requests(api)
    waits: list[float] = []
    monkeypatch.setattr(kube_rest, "time", types.SimpleNamespace(monotonic=time.monotonic, sleep=waits.append))
    assert [n.metadata.name for n in api.list_node().items] == ["c2"]
    assert waits == [], "another server is asked at once, not after a back-off"
    assert api.read_node("c2").metadata.name == "c2"
    up = f"https://127.0.0.1:{kube.port}"
    assert sent == [down["host"], up, up], "the server that answered is kept for the next call"


def test_without_a_ca_to_check_the_other_servers_nothing_is_sent_to_them(kube):
    from ansible_collections.cargoship.engine.plugins.module_utils._kube_access import api_client
    from ansible_collections.cargoship.engine.plugins.module_utils._kube_rest import ApiUnavailable
    from ansible_collections.cargoship.engine.plugins.module_utils._kube_rest import KubeApi as ProductApi

    kube.node("c2")
    unchecked = {"host": f"https://127.0.0.2:{kube.port}", "api_key": "unit-token", "validate_certs": False}
    api = ProductApi(api_client({**unchecked, "fallback_hosts": ["127.0.0.1"]}), deadline=time.monotonic() + 1.5)
    sent = record_requests(api)
    with pytest.raises(ApiUnavailable, match=r"the last: no answer \(Connection"):
        api.list_node()
    assert sent and set(sent) == {unchecked["host"]}, "the token went to a server that need not prove itself"


def test_when_every_server_is_down_the_error_names_the_last_one_asked(kube):
    from ansible_collections.cargoship.engine.plugins.module_utils._kube_access import api_client
    from ansible_collections.cargoship.engine.plugins.module_utils._kube_rest import ApiUnavailable
    from ansible_collections.cargoship.engine.plugins.module_utils._kube_rest import KubeApi as ProductApi

    down = {**kube.access, "host": f"https://127.0.0.2:{kube.port}"}
    # 127.0.0.3 refuses too; "no-such-host.invalid" does not resolve: passed over like a server that is down.
    api = ProductApi(
        api_client({**down, "fallback_hosts": ["127.0.0.3", "no-such-host.invalid"]}), deadline=time.monotonic() + 2
    )
    sent = record_requests(api)
    with pytest.raises(ApiUnavailable) as unavailable:
        api.list_node()
    message = str(unavailable.value)
    assert "the last: no answer from https://" in message, message
    others = {f"https://127.0.0.3:{kube.port}", f"https://no-such-host.invalid:{kube.port}"}
    assert set(sent) == {down["host"], *others}, "each server asked in turn, round after round"
    assert len(sent) >= 6
