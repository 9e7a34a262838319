# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""How the control-host modules reach the Kubernetes API, with the options and environment variables
that kubernetes.core's modules take, so that an operator's usual set-up works unchanged:

- ``kubeconfig`` (``K8S_AUTH_KUBECONFIG``), else ``KUBECONFIG`` (several files joined by ``:`` are
  merged, as kubectl does), else ``~/.kube/config``; ``context`` (``K8S_AUTH_CONTEXT``) picks one of its
  contexts instead of the current one;
- ``host`` (``K8S_AUTH_HOST``) with ``api_key`` (``K8S_AUTH_API_KEY``), ``ca_cert``
  (``K8S_AUTH_SSL_CA_CERT``), ``client_cert``/``client_key`` (``K8S_AUTH_CERT_FILE``/``K8S_AUTH_KEY_FILE``)
  and ``validate_certs`` (``K8S_AUTH_VERIFY_SSL``) override what the kubeconfig says, or stand alone;
- with neither a kubeconfig file nor a host, the in-cluster service account (a control host that is a pod).

Where the credentials are a bearer token or a client certificate (what k3s, RKE2 and most admin
kubeconfigs hold), the connection is made here with the standard library (``http.client`` and ``ssl``):
importing the kubernetes package costs about 0.15 s, and every module call is a fresh process. Anything
else (an ``exec`` or ``auth-provider`` credential, a proxy, several merged files, the in-cluster account,
a setting this file does not know) goes through the kubernetes package, as before.
"""

from __future__ import annotations

import base64
import http.client
import os
import ssl
import tempfile
import urllib.parse

from ansible.module_utils.basic import env_fallback


class LibraryMissing(Exception):
    """The kubernetes package is needed for these credentials and is not installed."""


def _package():
    try:
        from kubernetes import client, config
    except ImportError as exc:
        raise LibraryMissing(str(exc)) from exc
    return client, config


ARGUMENT_SPEC = {
    "kubeconfig": {"type": "path", "fallback": (env_fallback, ["K8S_AUTH_KUBECONFIG"])},
    "context": {"type": "str", "fallback": (env_fallback, ["K8S_AUTH_CONTEXT"])},
    "host": {"type": "str", "fallback": (env_fallback, ["K8S_AUTH_HOST"])},
    "api_key": {"type": "str", "no_log": True, "fallback": (env_fallback, ["K8S_AUTH_API_KEY"])},
    "ca_cert": {"type": "path", "fallback": (env_fallback, ["K8S_AUTH_SSL_CA_CERT"])},
    "client_cert": {"type": "path", "fallback": (env_fallback, ["K8S_AUTH_CERT_FILE"])},
    "client_key": {"type": "path", "no_log": False, "fallback": (env_fallback, ["K8S_AUTH_KEY_FILE"])},
    "validate_certs": {"type": "bool", "fallback": (env_fallback, ["K8S_AUTH_VERIFY_SSL"])},
    # The cluster's other API servers, for when the kubeconfig's one does not answer (_kube_rest.KubeApi).
    "fallback_hosts": {"type": "list", "elements": "str", "default": []},
}


def connection_params(args: dict) -> dict:
    """The API connection options out of an action's arguments, every one present (None when not given, or
    the default the specification gives), as a module's params would have them."""
    return {key: args.get(key, spec.get("default")) for key, spec in ARGUMENT_SPEC.items()}


def kubeconfig_files(params: dict) -> list[str]:
    """The kubeconfig files in force: the option, else KUBECONFIG (a list), else ~/.kube/config."""
    if params.get("kubeconfig"):
        return [os.path.expanduser(params["kubeconfig"])]
    listed = [p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    return [os.path.expanduser(p) for p in listed] or [os.path.expanduser("~/.kube/config")]


NOWHERE = (
    "there is no such file, and this is not a pod with a service account either; name a kubeconfig with "
    "cargoship_api_kubeconfig (K8S_AUTH_KUBECONFIG, KUBECONFIG), or the API server with K8S_AUTH_HOST"
)


def describe(params: dict) -> str:
    """Where the API was looked for, for error messages (never a credential)."""
    if params.get("host") and not any(os.path.exists(f) for f in kubeconfig_files(params)):
        return f"host {params['host']}"
    where = "the kubeconfig " + ":".join(kubeconfig_files(params))
    if params.get("context"):
        where += f", context {params['context']}"
    if params.get("host"):
        where += f", host {params['host']}"
    return where


def api_client(params: dict):
    """A client for the options and environment (see the module docstring): a plain one where the
    credentials allow, else the kubernetes package's ApiClient. Both have what _kube_rest.KubeApi uses."""
    plain = plain_settings(params)
    client = PlainClient(plain) if plain is not None else package_client(params)
    client.fallback_hosts = [str(host) for host in params.get("fallback_hosts") or [] if host]
    return client


def package_client(params: dict):
    """A kubernetes ApiClient for the options and environment."""
    client, config = _package()
    configuration = client.Configuration()
    files = [f for f in kubeconfig_files(params) if os.path.exists(f)]
    if files:
        # A list of files is merged as kubectl merges KUBECONFIG.
        config.load_kube_config(
            config_file=files[0] if len(files) == 1 else os.pathsep.join(files),
            context=params.get("context"),
            client_configuration=configuration,
        )
    elif params.get("kubeconfig") or (os.environ.get("KUBECONFIG") and not params.get("host")):
        raise ValueError("no kubeconfig file at " + ":".join(kubeconfig_files(params)))
    elif not params.get("host"):
        if not os.environ.get("KUBERNETES_SERVICE_HOST"):
            # The package's own words for this ("Service host/port is not set") name neither the file nor a fix.
            raise ValueError(NOWHERE)
        config.load_incluster_config(client_configuration=configuration)
    if params.get("host"):
        configuration.host = params["host"]
    if params.get("api_key"):
        # Replaces a token the kubeconfig gave, and the hook that would put the kubeconfig's back.
        configuration.api_key = {"BearerToken": "Bearer " + params["api_key"]}
        configuration.refresh_api_key_hook = None
    if params.get("ca_cert"):
        configuration.ssl_ca_cert = params["ca_cert"]
    if params.get("client_cert"):
        configuration.cert_file = params["client_cert"]
    if params.get("client_key"):
        configuration.key_file = params["client_key"]
    if params.get("validate_certs") is not None:
        configuration.verify_ssl = params["validate_certs"]
    return client.ApiClient(configuration)


# -- without the kubernetes package ------------------------------------------------------------------

PLAIN_CLUSTER_KEYS = frozenset(
    {"server", "certificate-authority", "certificate-authority-data", "insecure-skip-tls-verify"}
)
PLAIN_USER_KEYS = frozenset(
    {"token", "tokenFile", "client-certificate", "client-certificate-data", "client-key", "client-key-data"}
)


class PlainConfiguration:
    """The settings of one API server, as the kubernetes Configuration names them (host, ssl_ca_cert,
    verify_ssl, cert_file, key_file), plus the PEM data a kubeconfig may carry instead of files."""

    def __init__(self) -> None:
        self.host = ""
        self.token = ""
        self.ssl_ca_cert = ""
        self.ca_data = ""
        self.cert_file = ""
        self.cert_data = ""
        self.key_file = ""
        self.key_data = ""
        self.verify_ssl = True

    def auth_settings(self) -> dict:
        if not self.token:
            return {}
        return {"BearerToken": {"in": "header", "key": "authorization", "value": "Bearer " + self.token}}


def _yaml_load(path: str):
    # Imported here: PyYAML is ansible-core's own dependency on a control host, but a module's imports must
    # not need it (ansible-test sanity's import test).
    import yaml

    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def _named(entries, name: str, what: str) -> dict:
    for entry in entries or []:
        if isinstance(entry, dict) and entry.get("name") == name:
            return entry.get(what) if isinstance(entry.get(what), dict) else {}
    raise ValueError(f"the kubeconfig has no {what} named {name!r}")


def plain_settings(params: dict) -> PlainConfiguration | None:
    """The settings when this module can connect by itself, else None (the package is needed)."""
    files = [f for f in kubeconfig_files(params) if os.path.exists(f)]
    configuration = PlainConfiguration()
    if len(files) > 1:
        return None  # merging several files is the package's (kubectl's rules)
    if files:
        try:
            loaded = _yaml_load(files[0])
        except Exception:
            return None
        if not isinstance(loaded, dict):
            return None
        context_name = params.get("context") or loaded.get("current-context")
        if not context_name:
            return None
        context = _named(loaded.get("contexts"), context_name, "context")
        cluster = _named(loaded.get("clusters"), context.get("cluster"), "cluster")
        user = _named(loaded.get("users"), context.get("user"), "user")
        if (
            not set(cluster) <= PLAIN_CLUSTER_KEYS
            or not set(user) <= PLAIN_USER_KEYS
            or set(context) - {"cluster", "user"}
        ):
            return None  # exec, auth-provider, a proxy, a namespace...: the package's
        base = os.path.dirname(os.path.abspath(files[0]))

        def path(value: str) -> str:
            return value if os.path.isabs(value) else os.path.join(base, value)

        configuration.host = str(cluster.get("server") or "")
        configuration.ssl_ca_cert = (
            path(cluster["certificate-authority"]) if cluster.get("certificate-authority") else ""
        )
        configuration.ca_data = decoded(cluster.get("certificate-authority-data"))
        configuration.verify_ssl = not cluster.get("insecure-skip-tls-verify", False)
        configuration.token = str(user.get("token") or "")
        if user.get("tokenFile") and not configuration.token:
            with open(path(user["tokenFile"]), encoding="utf-8") as handle:
                configuration.token = handle.read().strip()
        configuration.cert_file = path(user["client-certificate"]) if user.get("client-certificate") else ""
        configuration.cert_data = decoded(user.get("client-certificate-data"))
        configuration.key_file = path(user["client-key"]) if user.get("client-key") else ""
        configuration.key_data = decoded(user.get("client-key-data"))
    elif params.get("kubeconfig") or (os.environ.get("KUBECONFIG") and not params.get("host")):
        raise ValueError("no kubeconfig file at " + ":".join(kubeconfig_files(params)))
    elif not params.get("host"):
        return None  # the in-cluster service account: the package's
    if params.get("host"):
        configuration.host = params["host"]
    if params.get("api_key"):
        configuration.token = params["api_key"]
    if params.get("ca_cert"):
        configuration.ssl_ca_cert, configuration.ca_data = params["ca_cert"], ""
    if params.get("client_cert"):
        configuration.cert_file, configuration.cert_data = params["client_cert"], ""
    if params.get("client_key"):
        configuration.key_file, configuration.key_data = params["client_key"], ""
    if params.get("validate_certs") is not None:
        configuration.verify_ssl = bool(params["validate_certs"])
    if urllib.parse.urlsplit(configuration.host).scheme not in ("https", "http"):
        return None  # the package's message for a server it cannot use
    return configuration


def decoded(data) -> str:
    return base64.b64decode(data).decode("ascii") if data else ""


class PlainResponse:
    def __init__(self, status: int, reason: str, data: bytes, headers=None):
        self.status, self.reason, self.data = status, reason, data
        self.headers = headers or {}


class PlainPool:
    """Kept-alive connections, one per API server it is asked to reach (the kubeconfig's, or another
    server's for a health check); what _kube_rest.KubeApi asks of urllib3's pool."""

    def __init__(self, configuration: PlainConfiguration):
        self.configuration = configuration
        self.connections: dict[tuple, http.client.HTTPConnection] = {}
        self.context: ssl.SSLContext | None = None

    def tls(self) -> ssl.SSLContext:
        """The TLS settings, made at the first connection (as the package reads its files then)."""
        if self.context is None:
            self.context = tls_context(self.configuration)
        return self.context

    @staticmethod
    def key(url: urllib.parse.SplitResult) -> tuple:
        return url.scheme, url.hostname, url.port or (443 if url.scheme == "https" else 80)

    def connect(self, url: urllib.parse.SplitResult, timeout: float) -> http.client.HTTPConnection:
        key = self.key(url)
        connection = self.connections.get(key)
        if connection is None:
            scheme, hostname, port = key
            if scheme == "https":
                connection = http.client.HTTPSConnection(hostname, port, timeout=timeout, context=self.tls())
            else:
                connection = http.client.HTTPConnection(hostname, port, timeout=timeout)
            self.connections[key] = connection
        connection.timeout = timeout
        if connection.sock is not None:
            connection.sock.settimeout(timeout)
        return connection

    def request(self, method, url, headers=None, body=None, timeout=30, **_options) -> PlainResponse:
        """One request (urllib3's ``retries`` and other options are not used: retrying is the caller's)."""
        parts = urllib.parse.urlsplit(url)
        target = parts.path + ("?" + parts.query if parts.query else "")
        if isinstance(body, str):
            body = body.encode("utf-8")  # http.client would send a str as ISO-8859-1
        kept = self.connections.get(self.key(parts))
        reused = kept is not None and kept.sock is not None
        try:
            return self.exchange(parts, timeout, method, target, body, headers or {})
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
            if not reused:
                raise
            # A kept-alive connection the server had closed meanwhile: once more, on a new one.
            return self.exchange(parts, timeout, method, target, body, headers or {})

    def exchange(self, parts, timeout, method, target, body, headers) -> PlainResponse:
        connection = self.connect(parts, timeout)
        try:
            connection.request(method, target, body=body, headers=headers)
            response = connection.getresponse()
            return PlainResponse(response.status, response.reason, response.read(), response.msg)
        except BaseException:
            self.drop(self.key(parts))
            raise

    def drop(self, key: tuple) -> None:
        connection = self.connections.pop(key, None)
        if connection is not None:
            connection.close()

    def close(self) -> None:
        for key in list(self.connections):
            self.drop(key)


def tls_context(configuration: PlainConfiguration) -> ssl.SSLContext:
    if not configuration.verify_ssl:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif configuration.ssl_ca_cert or configuration.ca_data:
        context = ssl.create_default_context(
            cafile=configuration.ssl_ca_cert or None, cadata=configuration.ca_data or None
        )
    else:
        context = ssl.create_default_context()
    if configuration.cert_file or configuration.cert_data:
        with tempfile.TemporaryDirectory(prefix="cargoship-tls-") as private:  # mode 0700, removed at once
            cert = configuration.cert_file or write_private(private, "client.crt", configuration.cert_data)
            key = configuration.key_file or (
                write_private(private, "client.key", configuration.key_data) if configuration.key_data else None
            )
            context.load_cert_chain(cert, key)
    return context


def write_private(directory: str, name: str, text: str) -> str:
    path = os.path.join(directory, name)
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w", encoding="ascii") as handle:
        handle.write(text)
    return path


class PlainRestClient:
    def __init__(self, pool: PlainPool):
        self.pool_manager = pool


class PlainClient:
    """What _kube_rest.KubeApi uses of a kubernetes ApiClient (``configuration``, ``rest_client.pool_manager``)."""

    def __init__(self, configuration: PlainConfiguration):
        self.configuration = configuration
        self.rest_client = PlainRestClient(PlainPool(configuration))
