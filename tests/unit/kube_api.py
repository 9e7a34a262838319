"""The lab's Kubernetes API double served over HTTPS on 127.0.0.1, with a real kubernetes client for
it: for unit tests of the code that talks to the API, without test hosts."""

from __future__ import annotations

import datetime
import ssl
import threading
import types

import kube_double
import labctl
from kubernetes import client
from kubernetes.client.rest import ApiException

from ansible_collections.cargoship.engine.plugins.module_utils._kube_access import api_client as product_client
from ansible_collections.cargoship.engine.plugins.module_utils._kube_rest import KubeApi as ProductApi


def stamp(micro: bool = False, ago: float = 0) -> str:
    moment = datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=ago)
    return moment.strftime("%Y-%m-%dT%H:%M:%S" + (".%fZ" if micro else "Z"))


class KubeApi:
    def __init__(self, state):
        lab = types.SimpleNamespace(hosts=[], state=state, token="unit-token", node_token="unit-node-token")
        labctl.make_certificates(lab)
        kube_double.Handler.token = lab.token
        # The kubelets' own credential (labctl gives the hosts one of their own).
        self.node_token = kube_double.Handler.node_token = lab.node_token
        self.store = kube_double.Handler.store = kube_double.Store()
        self.faults = kube_double.Handler.faults = kube_double.Faults()
        self.server = kube_double.ThreadingHTTPServer(("127.0.0.1", 0), kube_double.Handler)
        self.server.daemon_threads = True
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(state / "apiserver.crt"), str(state / "apiserver.key"))
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True, do_handshake_on_connect=False)
        self.stop = threading.Event()
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        threading.Thread(target=kube_double.controllers, args=(self.store, self.stop), daemon=True).start()
        configuration = client.Configuration()
        self.port = self.server.server_address[1]
        configuration.host = f"https://127.0.0.1:{self.port}"
        configuration.ssl_ca_cert = str(state / "ca.crt")
        configuration.api_key = {"BearerToken": f"Bearer {lab.token}"}
        self.api_client = client.ApiClient(configuration)
        # The typed client sets the double up and reads it back; the product's own REST client is what
        # the code under test is given (cargoship's modules never import the typed API classes), on the
        # connection a module makes for a token: the standard library's (module_utils/_kube_access.py).
        self.core = client.CoreV1Api(self.api_client)
        self.access = {"host": configuration.host, "api_key": lab.token, "ca_cert": configuration.ssl_ca_cert}
        self.product = ProductApi(product_client(self.access))
        # The same calls over the kubernetes package's connection (exec and auth-provider credentials).
        self.package_product = ProductApi(self.api_client)
        self.coordination = client.CoordinationV1Api(self.api_client)

    def node(self, name: str, ready: bool = True, labels: dict | None = None, voter: bool | None = None) -> None:
        """A node as its kubelet registers it, with its Lease; its InternalIP is where this double listens
        (``port``), as a server's own API server would. ``voter``: its EtcdIsVoter condition, if any."""
        conditions = [{"type": "Ready", "status": "True" if ready else "False", "lastHeartbeatTime": stamp()}]
        if voter is not None:
            conditions.append(
                {
                    "type": "EtcdIsVoter",
                    "status": str(voter),
                    "reason": "MemberNotLearner" if voter else "MemberIsLearner",
                }
            )
        addresses = [{"type": "InternalIP", "address": "127.0.0.1"}, {"type": "Hostname", "address": name}]
        body = {
            "metadata": {"name": name, "labels": labels or {}},
            "status": {"conditions": conditions, "addresses": addresses},
        }
        self.core.create_node(body)
        self.kubelet_alive(name)

    def kubelet_alive(self, name: str, silent_for: float = 0) -> None:
        """The kubelet renews its Lease now, or did last ``silent_for`` seconds ago (a stopped kubelet's Lease)."""
        spec = {"holderIdentity": name, "renewTime": stamp(micro=True, ago=silent_for)}
        try:
            self.coordination.create_namespaced_lease(
                "kube-node-lease", {"metadata": {"name": name, "namespace": "kube-node-lease"}, "spec": spec}
            )
        except ApiException:
            self.coordination.patch_namespaced_lease(name, "kube-node-lease", {"spec": spec})

    def pod(self, name: str, node: str, owner: str | None = "web", grace: int = 0, namespace: str = "default") -> None:
        meta = {"name": name, "namespace": namespace, "labels": {"app": "web"}}
        if owner:
            meta["ownerReferences"] = [
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner, "uid": "u", "controller": True}
            ]
        spec = {"nodeName": node, "terminationGracePeriodSeconds": grace, "containers": [{"name": "c", "image": "i"}]}
        self.core.create_namespaced_pod(namespace, {"metadata": meta, "spec": spec, "status": {"phase": "Running"}})

    def close(self) -> None:
        self.stop.set()
        self.server.shutdown()
