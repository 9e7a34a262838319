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
import errno
import http.client
import json
import random
import socket
import ssl
import time
import urllib.parse


class ApiException(Exception):
    """A refusal of the API server: its HTTP ``status`` and ``reason``, and the ``body`` (its Status
    object, JSON), as the kubernetes client's exception of that name carries them."""

    def __init__(self, status: int = 0, reason: str = "", body: str = ""):
        super().__init__(f"({status}) Reason: {reason}")
        self.status, self.reason, self.body = status, reason, body


class ApiUnavailable(Exception):
    """The API answered nothing but "not yet" (a transient status, a dropped or refused connection, no
    answer in time) until the step's deadline: what was asked, how often, for how long, the last answer."""

    def __init__(self, what: str, attempts: int, seconds: float, last: str):
        super().__init__(
            f"{what}: only transient answers in {attempts} attempt{'s' if attempts != 1 else ''} over "
            f"{seconds:.0f} s, the last: {last}"
        )
        self.last = last


# Fields whose value maps user keys to values: read as dicts, as the typed models give them.
MAPS = frozenset({"labels", "annotations", "matchLabels", "nodeSelector", "data", "capacity", "allocatable"})
# How long one request may take; the typed client set none, a hung API would hang the run.
REQUEST_TIMEOUT = 30
# How long one request to another API server than the kubeconfig's may wait for each answer (to connect, for
# each read): an address that does not lead to an API server must not hold a call up for REQUEST_TIMEOUT.
FALLBACK_TIMEOUT = 5
# How long a call is retried while the API answers "not yet", where its step sets no deadline of its own
# (a wait's deadline is its timeout). Long enough for an apiserver restart or an etcd leader election.
RETRY_FOR = 30
# The statuses that mean "not yet" (real-engines.md, "The API server and etcd"): 429 from priority and
# fairness, 500 during an etcd leader change, 502/504 from a load balancer or a timed-out etcd request,
# 503 while an apiserver starts. client-go retries the same ones.
TRANSIENT_STATUSES = frozenset({429, 500, 502, 503, 504})
# Connection failures that a restarting API server or a busy load balancer gives; a name that does not
# resolve or a certificate that does not verify is never retried.
TRANSIENT_ERRNOS = frozenset({errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EHOSTDOWN})
URLLIB3_TRANSIENT = frozenset(
    {"ProtocolError", "NewConnectionError", "ConnectTimeoutError", "ReadTimeoutError", "MaxRetryError"}
)


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


def status_message(text: str) -> str:
    """The message of a Status object (the API server's own words), else ''."""
    try:
        answer = json.loads(text)
    except ValueError:
        return ""
    return str(answer.get("message") or "") if isinstance(answer, dict) and answer.get("kind") == "Status" else ""


def transient_answer(path: str, status: int, text: str) -> bool:
    """Whether an answer means "not yet". The eviction subresource's own refusals are answers: a budget
    that does not allow the eviction yet (429 with a Status; priority and fairness answer 429 in plain
    text) and a pod under more than one budget (500); the drain deals with them."""
    if status not in TRANSIENT_STATUSES:
        return False
    if path.endswith("/eviction"):
        message = status_message(text)
        if status == 429 and message:
            return False
        if status == 500 and "PodDisruptionBudget" in message:
            return False
    return True


def transient_error(exc: BaseException) -> bool:
    """Whether a failure to get an answer at all is worth another attempt: refused, reset or dropped
    connections and timeouts (an API server restarting), not a name that does not resolve or a
    certificate that does not verify. urllib3 wraps the cause (``reason``)."""
    found, seen, stack = False, set(), [exc]
    while stack:
        error = stack.pop()
        if error is None or id(error) in seen:
            continue
        seen.add(id(error))
        if isinstance(error, (socket.gaierror, ssl.SSLCertVerificationError)):
            return False
        if isinstance(
            error,
            (
                ConnectionError,
                TimeoutError,
                http.client.RemoteDisconnected,
                http.client.IncompleteRead,
                ssl.SSLEOFError,
                # The same close during the handshake, as Python 3.11.2 (Debian 12's) reports it.
                ssl.SSLZeroReturnError,
            ),
        ) or (isinstance(error, OSError) and error.errno in TRANSIENT_ERRNOS):
            found = True
        elif type(error).__module__.startswith("urllib3") and type(error).__name__ in URLLIB3_TRANSIENT:
            found = True
        # urllib3 keeps the cause in ``reason``; ssl's errors keep a string there (UNEXPECTED_EOF_WHILE_READING).
        stack += [
            e
            for e in (getattr(error, "reason", None), error.__cause__, error.__context__)
            if isinstance(e, BaseException)
        ]
    return found


def retry_after(value) -> float | None:
    """A Retry-After header in seconds (the API server sends whole seconds), None without one."""
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def api_servers(host: str, others, may_fall_back: bool) -> list[str]:
    """The API servers a call may go to: the kubeconfig's (``host``), then, where ``may_fall_back``, the same
    scheme and port at each of ``others`` (names or addresses; the kubeconfig's own is not repeated). Not
    where the kubeconfig's server has a path: that is a proxy in front of the API, not an API server."""
    servers = [host]
    parts = urllib.parse.urlsplit(host)
    if not may_fall_back or parts.path.strip("/") or not parts.hostname:
        return servers
    port = parts.port or (443 if parts.scheme == "https" else 80)
    seen = {parts.hostname.lower()}
    for other in others or ():
        name = str(other).strip().strip("[]").lower()
        if not name or name in seen:
            continue
        seen.add(name)
        servers.append(f"{parts.scheme}://{f'[{name}]' if ':' in name else name}:{port}")
    return servers


def backoff(attempt: int) -> float:
    """The wait before attempt ``attempt + 1``: 0.25 s doubling to 4 s, with jitter, so that many clients
    retrying at once do not arrive together."""
    return min(4.0, 0.25 * 2 ** (attempt - 1)) * random.uniform(0.8, 1.2)


class KubeApi:
    """The calls of the typed client's CoreV1Api, PolicyV1Api, CoordinationV1Api and CustomObjectsApi that
    cargoship makes, same names and arguments; failures raise :class:`ApiException` (``status``,
    ``reason``, ``body``).

    Every call rides through transient failures: it is tried again with backoff (the server's Retry-After
    where it sends one) until ``deadline`` (time.monotonic(); the step's own, else RETRY_FOR seconds from
    the call), then raises :class:`ApiUnavailable`. A definite answer (401, 403, 404, 409, 422, a refused
    eviction) is raised at once.

    Where the client names the cluster's other API servers (``fallback_hosts``, see _kube_access) and the
    servers must prove themselves with the kubeconfig's CA, a call that gets no answer at all from one server
    (refused, dropped, timed out) goes to the next at once, and the server that answered is kept for the
    calls after it: an operator's kubeconfig names one server, which may be the one that is down."""

    def __init__(self, api_client, deadline: float | None = None):
        self.api_client = api_client
        self.deadline = deadline
        self.servers = api_servers(
            api_client.configuration.host, getattr(api_client, "fallback_hosts", ()), self.verifies_servers()
        )
        self.current = 0  # which of self.servers calls go to

    def answer(
        self,
        method: str,
        path: str,
        query=None,
        body=None,
        content_type="",
        *,
        timeout=REQUEST_TIMEOUT,
        retry_for: float | None = None,
        statuses: bool = True,
        server: str | None = None,
        credentials: bool = True,
    ):
        """(status, reason, text) of the first answer that is not "not yet" (``statuses``: a transient
        status counts as "not yet"; else only a connection that fails does)."""
        began = time.monotonic()
        deadline = (
            self.deadline if self.deadline is not None and retry_for is None else began + (retry_for or RETRY_FOR)
        )
        attempts = 0
        rotates = server is None and len(self.servers) > 1
        tried: set[int] = set()
        while True:
            attempts += 1
            remaining = deadline - time.monotonic()
            wait = None
            fallback = rotates and self.current > 0
            target = server or self.servers[self.current]
            tried.add(self.current)
            try:
                status, reason, text, after = self.send(
                    method,
                    path,
                    query,
                    body,
                    content_type,
                    timeout=max(1.0, min(FALLBACK_TIMEOUT if fallback else timeout, remaining)),
                    server=target,
                    credentials=credentials,
                )
            except Exception as exc:  # the connection's own kinds: http.client's, ssl's, urllib3's
                # Another server that cannot be reached at all (a name that does not resolve, a certificate
                # that is not the cluster's: refused before any credential is sent) is passed over like one
                # that is down; the kubeconfig's own server fails the call at once, as without others.
                if not transient_error(exc) and not fallback:
                    raise
                last = f"no answer{f' from {target}' if rotates else ''} ({type(exc).__name__}: {exc})"
                if rotates:
                    self.current = (self.current + 1) % len(self.servers)
                    if self.current not in tried and time.monotonic() < deadline:
                        continue  # a server not asked yet in this call: at once
            else:
                if not statuses or not transient_answer(path, status, text):
                    return status, reason, text
                last = f"{status} {status_message(text) or reason}".strip()
                wait = after
            now = time.monotonic()
            if now >= deadline:
                raise ApiUnavailable(f"{method} {path}", attempts, now - began, last)
            tried.clear()
            time.sleep(min(deadline - now, wait if wait is not None else backoff(attempts)))

    def send(
        self,
        method: str,
        path: str,
        query=None,
        body=None,
        content_type="",
        timeout=REQUEST_TIMEOUT,
        server: str | None = None,
        credentials: bool = True,
        **options,
    ):
        """One request with the client's address (or ``server``'s), TLS, proxy and credentials (none with
        ``credentials=False``): (status, reason, text, the Retry-After seconds or None)."""
        configuration = self.api_client.configuration
        headers = {"Accept": "application/json, */*"}
        # auth_settings() also runs the kubeconfig's token refresh (exec and auth-provider credentials).
        for setting in configuration.auth_settings().values() if credentials else ():
            if setting.get("in") == "header" and setting.get("value"):
                headers[setting["key"]] = setting["value"]
        query = {k: v for k, v in (query or {}).items() if v is not None}
        url = (server or configuration.host) + path + ("?" + urllib.parse.urlencode(query) if query else "")
        payload = None
        if body is not None:
            headers["Content-Type"] = content_type or "application/json"
            payload = json.dumps(body)
        response = self.api_client.rest_client.pool_manager.request(
            method, url, headers=headers, body=payload, timeout=timeout, **options
        )
        text = response.data.decode("utf-8", "replace")
        return response.status, response.reason, text, retry_after(response.headers.get("Retry-After"))

    def request(self, method: str, path: str, query: dict | None = None, body=None, content_type: str = ""):
        """The decoded JSON answer of one request (None for an empty one); ApiException for a refusal."""
        status, reason, text = self.answer(method, path, query, body, content_type)
        if not 200 <= status < 300:
            raise ApiException(status=status, reason=reason, body=text)
        return json.loads(text) if text.strip() else None

    def get(self, path: str, **query) -> Resource:
        return Resource(self.request("GET", path, query) or {})

    def verifies_servers(self) -> bool:
        """Whether a server must prove itself with a certificate of the kubeconfig's own CA, which only the
        cluster's API servers hold."""
        configuration = self.api_client.configuration
        ca = getattr(configuration, "ssl_ca_cert", None) or getattr(configuration, "ca_data", None)
        return bool(getattr(configuration, "verify_ssl", True) and ca)

    def get_text(self, path: str, server: str | None = None, retry_for: float = 10) -> tuple[int, str]:
        """A GET of a path that answers in text (a health check), of this API server or of ``server``
        (``https://host:port``): its status and text, whatever they are. Only a connection that fails is
        tried again, for ``retry_for`` seconds: a failing check is an answer.

        Another server's address comes from a node's status, which that node's kubelet writes: the
        credentials go there only when the server must prove itself with a certificate of the cluster's CA
        (``verifies_servers``); otherwise the check goes without them (its answer may then be 401)."""
        credentials = server is None or self.verifies_servers()
        status, _reason, text = self.answer(
            "GET", path, timeout=10, retry_for=retry_for, statuses=False, server=server, credentials=credentials
        )
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
