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
"""

from __future__ import annotations

import os

from ansible.module_utils.basic import env_fallback

try:
    from kubernetes import client, config
except ImportError:  # the module reports the missing library itself
    client = config = None

ARGUMENT_SPEC = {
    "kubeconfig": {"type": "path", "fallback": (env_fallback, ["K8S_AUTH_KUBECONFIG"])},
    "context": {"type": "str", "fallback": (env_fallback, ["K8S_AUTH_CONTEXT"])},
    "host": {"type": "str", "fallback": (env_fallback, ["K8S_AUTH_HOST"])},
    "api_key": {"type": "str", "no_log": True, "fallback": (env_fallback, ["K8S_AUTH_API_KEY"])},
    "ca_cert": {"type": "path", "fallback": (env_fallback, ["K8S_AUTH_SSL_CA_CERT"])},
    "client_cert": {"type": "path", "fallback": (env_fallback, ["K8S_AUTH_CERT_FILE"])},
    "client_key": {"type": "path", "no_log": False, "fallback": (env_fallback, ["K8S_AUTH_KEY_FILE"])},
    "validate_certs": {"type": "bool", "fallback": (env_fallback, ["K8S_AUTH_VERIFY_SSL"])},
}


def kubeconfig_files(params: dict) -> list[str]:
    """The kubeconfig files in force: the option, else KUBECONFIG (a list), else ~/.kube/config."""
    if params.get("kubeconfig"):
        return [os.path.expanduser(params["kubeconfig"])]
    listed = [p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    return [os.path.expanduser(p) for p in listed] or [os.path.expanduser("~/.kube/config")]


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
    """A kubernetes ApiClient for the options and environment (see the module docstring)."""
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
