# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Kubernetes API calls cargoship makes, as plain REST over the connection _kube_access gives (the
standard library's where the credentials allow, else the kubernetes client's, with its address, TLS
settings, proxy and credentials, refreshed tokens included), by the names the typed client gives them.

Why not the typed API classes: importing them is most of a module call's cost. With kubernetes 37,
``CoreV1Api`` alone takes about a second to import (it builds a pydantic model class for every type it
names), and every cluster_node call is a fresh process; ``ApiClient`` and the kubeconfig loader take
0.15 s more, which _kube_access saves for token and client-certificate credentials. The objects read come
back as :class:`Resource`, whose fields read as the typed models' do.
"""

from __future__ import annotations

import datetime
import json
import urllib.parse


class ApiException(Exception):
    """A refusal of the API server: its HTTP ``status`` and ``reason``, and the ``body`` (its Status
    object, JSON), as the kubernetes client's exception of that name carries them."""

    def __init__(self, status: int = 0, reason: str = "", body: str = ""):
        super().__init__(f"({status}) Reason: {reason}")
        self.status, self.reason, self.body = status, reason, body


# Fields whose value maps user keys to values: read as dicts, as the typed models give them.
MAPS = frozenset({"labels", "annotations", "matchLabels", "nodeSelector", "data", "capacity", "allocatable"})
# How long one request may take; the typed client set none, a hung API would hang the run.
REQUEST_TIMEOUT = 30


def parse_time(text: str) -> datetime.datetime:
    """An API time (RFC 3339, MicroTime too) as an aware datetime."""
    moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=datetime.UTC)


def camel(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(part[:1].upper() + part[1:] for part in rest)


def wrap(key: str | None, value):
    if isinstance(value, dict):
        return dict(value) if key in MAPS else Resource(value)
    if isinstance(value, list):
        return [wrap(None, item) for item in value]
    if isinstance(value, str) and key and (key.endswith("Time") or key.endswith("Timestamp")):
        return parse_time(value)
    return value


class Resource:
    """An object read from the API. Its fields read as the typed client's models read them: by snake_case
    attribute (``pod.metadata.owner_references``), None when absent, times as aware datetimes, labels,
    annotations and selectors' ``match_labels`` as dicts, an empty object (``emptyDir: {}``) as a Resource,
    not None."""

    __slots__ = ("_data",)

    def __init__(self, data: dict):
        self._data = data

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        key = camel(name)
        return wrap(key, self._data.get(key))

    def __repr__(self) -> str:
        return f"Resource({self._data!r})"


class KubeApi:
    """The calls of the typed client's CoreV1Api, PolicyV1Api, CoordinationV1Api and CustomObjectsApi that
    cargoship makes, same names and arguments; failures raise :class:`ApiException` (``status``,
    ``reason``, ``body``)."""

    def __init__(self, api_client):
        self.api_client = api_client

    def send(self, method: str, path: str, query=None, body=None, content_type="", timeout=REQUEST_TIMEOUT, **options):
        """One request with the client's address, TLS, proxy and credentials: (status, reason, text)."""
        configuration = self.api_client.configuration
        headers = {"Accept": "application/json, */*"}
        # auth_settings() also runs the kubeconfig's token refresh (exec and auth-provider credentials).
        for setting in configuration.auth_settings().values():
            if setting.get("in") == "header" and setting.get("value"):
                headers[setting["key"]] = setting["value"]
        query = {k: v for k, v in (query or {}).items() if v is not None}
        url = configuration.host + path + ("?" + urllib.parse.urlencode(query) if query else "")
        payload = None
        if body is not None:
            headers["Content-Type"] = content_type or "application/json"
            payload = json.dumps(body)
        response = self.api_client.rest_client.pool_manager.request(
            method, url, headers=headers, body=payload, timeout=timeout, **options
        )
        return response.status, response.reason, response.data.decode("utf-8", "replace")

    def request(self, method: str, path: str, query: dict | None = None, body=None, content_type: str = ""):
        """The decoded JSON answer of one request (None for an empty one); ApiException for a refusal."""
        status, reason, text = self.send(method, path, query, body, content_type)
        if not 200 <= status < 300:
            raise ApiException(status=status, reason=reason, body=text)
        return json.loads(text) if text.strip() else None

    def get(self, path: str, **query) -> Resource:
        return Resource(self.request("GET", path, query) or {})

    def get_text(self, path: str) -> tuple[int, str]:
        """A GET of a path that answers in text (a health check): its status and text, whatever they are."""
        status, _reason, text = self.send("GET", path, timeout=10, retries=False)
        return status, text

    # core/v1
    def read_node(self, name: str) -> Resource:
        return self.get(f"/api/v1/nodes/{quote(name)}")

    def list_node(self, label_selector: str | None = None) -> Resource:
        return self.get("/api/v1/nodes", labelSelector=label_selector)

    def patch_node(self, name: str, body: dict) -> Resource:
        # What kubectl cordon sends; for the fields cargoship patches, the same as a JSON merge patch.
        answer = self.request(
            "PATCH", f"/api/v1/nodes/{quote(name)}", body=body, content_type="application/strategic-merge-patch+json"
        )
        return Resource(answer or {})

    def list_pod_for_all_namespaces(self, field_selector: str | None = None) -> Resource:
        return self.get("/api/v1/pods", fieldSelector=field_selector)

    def read_namespaced_pod(self, name: str, namespace: str) -> Resource:
        return self.get(f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}")

    def create_namespaced_pod_eviction(self, name: str, namespace: str) -> None:
        eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace}}
        self.request("POST", f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}/eviction", body=eviction)

    # policy/v1, coordination.k8s.io/v1
    def list_pod_disruption_budget_for_all_namespaces(self) -> Resource:
        return self.get("/apis/policy/v1/poddisruptionbudgets")

    def read_namespaced_lease(self, name: str, namespace: str) -> Resource:
        return self.get(f"/apis/coordination.k8s.io/v1/namespaces/{quote(namespace)}/leases/{quote(name)}")

    def list_namespaced_lease(self, namespace: str) -> Resource:
        return self.get(f"/apis/coordination.k8s.io/v1/namespaces/{quote(namespace)}/leases")

    # custom resources: plain dicts, as CustomObjectsApi gives them
    def list_cluster_custom_object(self, group: str, version: str, plural: str, label_selector=None) -> dict:
        return self.request("GET", f"/apis/{group}/{version}/{plural}", {"labelSelector": label_selector}) or {}

    def delete_namespaced_custom_object(self, group: str, version: str, namespace: str, plural: str, name: str):
        return self.request("DELETE", f"/apis/{group}/{version}/namespaces/{quote(namespace)}/{plural}/{quote(name)}")


def quote(segment: str) -> str:
    return urllib.parse.quote(str(segment), safe="")
