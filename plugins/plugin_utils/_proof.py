# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A node's proof and its stamp, on the control host.

The desired state a node should run is summed up in one digest, worked out from the inventory alone (so
that ``cargoship status`` can compare without going to the hosts): the engine, the node's role and each
kind of configuration the inventory names, credentials masked (a changed password does not change the
digest: the digest is written where anyone who can read nodes can read it). Once the engine's evidence
proved that a restarted node runs what was written (module_utils/_engine_evidence.py), the node is stamped
with that digest, the run, and the engine's own fingerprints at that moment (its node-config-hash, RKE2's
apiserver FILE_HASH), so that a later restart with other files shows as unproven.
"""

from __future__ import annotations

import base64
import hashlib
import json

from ansible_collections.cargoship.engine.plugins.module_utils._credentials import masked
from ansible_collections.cargoship.engine.plugins.module_utils._desired_state import ABSENT

STAMP = "cargoship.io/proven"
NODE_KINDS = {"server": ("registries", "audit_policy", "pod_security"), "agent": ("registries",)}


def kinds_named(state: dict, node_role: str) -> list:
    """The kinds of configuration the desired state names for a node of this role (a value or absent)."""
    return [kind for kind in NODE_KINDS[node_role] if state.get(kind) is not None]


def desired_digest(state: dict, node_role: str) -> str:
    """The digest of what a node of this role should run: its engine and each kind the state names, with
    credentials masked, as canonical JSON."""
    summary: dict = {"engine": state.get("engine"), "node_role": node_role}
    for kind in kinds_named(state, node_role):
        value = state[kind]
        summary[kind] = value if value == ABSENT else masked(value, kind)
        if kind == "audit_policy" and value != ABSENT and state.get("audit_log"):
            summary["audit_log"] = state["audit_log"]
    text = json.dumps(summary, sort_keys=True, separators=(",", ":"), default=str)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def fingerprints(engine: str, annotations: dict, apiserver_pod: dict | None) -> dict:
    """The engine's own fingerprints of what it loaded, as the API shows them now."""
    found = {}
    config_hash = (annotations or {}).get(f"{engine}.io/node-config-hash")
    if config_hash:
        found["node_config_hash"] = config_hash
    if apiserver_pod is not None:
        containers = (apiserver_pod.get("spec") or {}).get("containers") or [{}]
        for item in containers[0].get("env") or []:
            if isinstance(item, dict) and item.get("name") == "FILE_HASH":
                found["apiserver_file_hash"] = item.get("value")
    return found


def stamp_text(digest: str, run_id: str, kinds: list, prints: dict) -> str:
    return json.dumps({"digest": digest, "run": run_id, "kinds": sorted(kinds), **prints}, sort_keys=True)


def read_stamp(annotations: dict) -> dict | None:
    """A node's stamp, or None when it has none (or one that is not cargoship's format)."""
    text = (annotations or {}).get(STAMP)
    try:
        stamp = json.loads(text) if text else None
    except ValueError:
        return None
    return stamp if isinstance(stamp, dict) and isinstance(stamp.get("digest"), str) else None


CONFIG_HASH = "helmcharts.helm.cattle.io/configHash"


def helm_config_hash(chart_name: str, chart_spec: dict, config_values: str) -> str:
    """The configHash helm-controller puts on a chart's helm-install job (k3s-io/helm-controller
    pkg/controllers/chart/chart.go, hashObjects; real-engines.md): sha256 over the data of the values
    Secret (the HelmChart's valuesContent, its repoCA, the HelmChartConfig's valuesContent, under their
    keys; each value base64 as the object's unstructured form holds it), then of the content ConfigMap (the
    chart's chartContent), each key then its value, keys sorted; written SHA256=<upper-case hex>."""
    secret = {
        "values-01_HelmChart.yaml": chart_spec.get("valuesContent") or "",
        "ca-file.pem": chart_spec.get("repoCA") or "",
        "values-10_HelmChartConfig.yaml": config_values or "",
    }
    content = {f"{chart_name}.tgz.base64": chart_spec.get("chartContent") or ""}
    digest = hashlib.sha256()
    for data in ({k: base64.b64encode(v.encode()).decode() for k, v in secret.items() if v}, content):
        for key in sorted(k for k, v in data.items() if v):
            digest.update(key.encode())
            digest.update(data[key].encode())
    return "SHA256=" + digest.hexdigest().upper()


def chart_findings(name: str, namespace: str, wanted: str, chart: dict | None, config: dict | None, job: dict | None):
    """Whether helm-controller applied a chart's values as written: (proven line or None, differs line or
    None, note or None). ``chart``, ``config``, ``job``: the HelmChart, the HelmChartConfig and the
    helm-install job as the API has them (None when it has none)."""
    title = f"{name} values"
    if chart is None:
        # helm-controller applies a HelmChartConfig only to the HelmChart of its name: nothing runs them.
        return None, None, f"{title}: no HelmChart {namespace}/{name} in the cluster, so nothing applies them"
    if config is None or ((config.get("spec") or {}).get("valuesContent") or "") != wanted:
        return (
            None,
            f"{title}: the HelmChartConfig in the API is not what was written (the manifest is not applied)",
            None,
        )
    expected = helm_config_hash(name, chart.get("spec") or {}, wanted)
    template = ((job or {}).get("spec") or {}).get("template") or {}
    shown = ((template.get("metadata") or {}).get("annotations") or {}).get(CONFIG_HASH)
    if job is None or shown != expected:
        return (
            None,
            f"{title}: no helm-install-{name} job with the values' hash yet (helm-controller has not run them)",
            None,
        )
    if not ((job.get("status") or {}).get("succeeded") or 0):
        return None, f"{title}: helm-install-{name} has not succeeded with them", None
    return f"{title}: applied by helm-install job, hash matches", None, None
