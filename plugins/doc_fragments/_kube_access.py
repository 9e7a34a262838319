# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    # How the control-host modules reach the Kubernetes API: kubernetes.core's options and variables.
    DOCUMENTATION = r"""
options:
  kubeconfig:
    description:
      - Path of the kubeconfig on the control host.
      - If not given, E(K8S_AUTH_KUBECONFIG), else the files of E(KUBECONFIG) (merged, as kubectl does),
        else C(~/.kube/config); with none of them and no O(host), the in-cluster service account.
    type: path
  context:
    description:
      - The kubeconfig context to use instead of its current context.
      - If not given, E(K8S_AUTH_CONTEXT).
    type: str
  host:
    description:
      - URL of the API server, overriding the kubeconfig's (or used without one).
      - If not given, E(K8S_AUTH_HOST).
    type: str
  api_key:
    description:
      - Bearer token for the API.
      - If not given, E(K8S_AUTH_API_KEY).
    type: str
  ca_cert:
    description:
      - CA certificate file that signed the API server's certificate.
      - If not given, E(K8S_AUTH_SSL_CA_CERT).
    type: path
  client_cert:
    description:
      - Client certificate file.
      - If not given, E(K8S_AUTH_CERT_FILE).
    type: path
  client_key:
    description:
      - Client key file.
      - If not given, E(K8S_AUTH_KEY_FILE).
    type: path
  validate_certs:
    description:
      - Whether to check the API server's certificate.
      - If not given, E(K8S_AUTH_VERIFY_SSL); else what the kubeconfig says (checked by default).
    type: bool
  fallback_hosts:
    description:
      - Addresses (host names or IP addresses) of the cluster's other API servers, tried in turn when the
        API server of the kubeconfig (or O(host)) gives no answer at all (a refused, dropped or timed-out
        connection), with its scheme, port, CA and credentials. An address that answers is kept for the
        rest of the task.
      - Only where the servers must prove themselves with a certificate of that CA (a CA is given and
        certificates are checked), so that credentials never go to an address that need not prove it is the
        cluster's.
      - The cargoship playbooks give the controllers' addresses (C(ansible_host), else the inventory name),
        so that a run reaches the API while the server an operator's kubeconfig names is down.
    type: list
    elements: str
    default: []
"""
