"""Modules run as Ansible runs them (a process, JSON arguments in, JSON out) where their logic is local."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from ansible_collections.cargoship.engine.plugins.module_utils import _engine_info as engine_info
from ansible_collections.cargoship.engine.plugins.module_utils._credentials import moved_out as without_credentials
from ansible_collections.cargoship.engine.plugins.module_utils._desired_state import chart_addon_name
from ansible_collections.cargoship.engine.plugins.modules import local_kubeconfig
from ansible_collections.cargoship.engine.plugins.plugin_utils._in_process import run_module as in_process

REPO = Path(__file__).resolve().parents[2]
MODULES = REPO / "plugins" / "modules"


def run_module(name: str, args: dict, check_mode: bool = False) -> dict:
    payload = {"ANSIBLE_MODULE_ARGS": {**args, "_ansible_check_mode": check_mode}}
    result = subprocess.run(
        [sys.executable, str(MODULES / f"{name}.py")],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(REPO / ".collections")},
    )
    return json.loads(result.stdout)


@pytest.fixture
def lock(tmp_path):
    return str(tmp_path / "lock.json")


def test_lock_is_taken_kept_and_released_by_its_run(lock):
    taken = run_module("host_lock", {"state": "acquired", "run_id": "a", "path": lock, "holder": {"user": "ann"}})
    assert taken["changed"] and not taken.get("failed")
    assert json.loads(Path(lock).read_text()) == {
        "run_id": "a",
        "holder": {"user": "ann"},
        "stale_after": 60,
        "touch_interval": 30,
    }
    assert run_module("host_lock", {"state": "acquired", "run_id": "a", "path": lock})["changed"] is False
    released = run_module("host_lock", {"state": "released", "run_id": "a", "path": lock})
    assert released["changed"] and not Path(lock).exists()


def test_a_fresh_lock_of_another_run_fails_naming_the_holder_and_changes_nothing(lock):
    run_module("host_lock", {"state": "acquired", "run_id": "a", "path": lock, "holder": {"user": "ann", "pid": 7}})
    before = Path(lock).read_text(), os.stat(lock).st_mtime
    refused = run_module("host_lock", {"state": "acquired", "run_id": "b", "path": lock})
    assert refused["failed"] and refused["held"]
    assert "locked by run a (user=ann, pid=7)" in refused["msg"]
    assert (Path(lock).read_text(), os.stat(lock).st_mtime) == before
    not_ours = run_module("host_lock", {"state": "released", "run_id": "b", "path": lock})
    assert not_ours["failed"] and Path(lock).exists()


def test_a_stale_lock_is_taken_over(lock):
    run_module("host_lock", {"state": "acquired", "run_id": "a", "path": lock})
    old = time.time() - 120
    os.utime(lock, (old, old))
    taken = run_module("host_lock", {"state": "acquired", "run_id": "b", "path": lock, "stale_after": 60})
    assert taken["took_over"] and json.loads(Path(lock).read_text())["run_id"] == "b"


def test_a_taker_judges_a_lock_by_its_holders_window_never_by_its_own(lock):
    run_module(
        "host_lock", {"state": "acquired", "run_id": "a", "path": lock, "stale_after": 600, "touch_interval": 60}
    )
    old = time.time() - 120  # two of its holder's touches late at most: the holder is alive
    os.utime(lock, (old, old))
    refused = run_module(
        "host_lock", {"state": "acquired", "run_id": "b", "path": lock, "stale_after": 2, "touch_interval": 1}
    )
    assert refused["failed"] and "goes stale after 600s untouched" in refused["msg"], refused
    assert json.loads(Path(lock).read_text())["run_id"] == "a"
    # A lock of an older cargoship records no window: the taker's own is the one there is.
    Path(lock).write_text(json.dumps({"run_id": "old", "holder": {}}))
    os.utime(lock, (old, old))
    assert run_module("host_lock", {"state": "acquired", "run_id": "b", "path": lock, "stale_after": 60})["took_over"]


@pytest.mark.parametrize(("stale_after", "touch_interval"), [(1, 30), (0, 30), (59, 30), (10, 0)])
def test_a_stale_window_shorter_than_two_touches_is_refused_before_anything(lock, stale_after, touch_interval):
    args = {
        "state": "acquired",
        "run_id": "a",
        "path": lock,
        "stale_after": stale_after,
        "touch_interval": touch_interval,
    }
    refused = run_module("host_lock", args)
    assert refused["failed"] and "the lock's" in refused["msg"] and not Path(lock).exists()


def test_check_mode_only_assesses_the_lock(lock):
    assessed = run_module("host_lock", {"state": "acquired", "run_id": "a", "path": lock}, check_mode=True)
    assert assessed["changed"] and not Path(lock).exists()


def test_force_breaks_anyones_lock(lock):
    run_module("host_lock", {"state": "acquired", "run_id": "a", "path": lock})
    assert run_module("host_lock", {"state": "released", "run_id": "x", "force": True, "path": lock})["changed"]
    assert not Path(lock).exists()


@pytest.mark.parametrize(
    ("older", "newer"),
    [("v1.30.2+k3s1", "v1.30.2+k3s2"), ("v1.30.2+k3s1", "v1.30.10+k3s1"), ("v1.29.9+rke2r3", "v1.30.0+rke2r1")],
)
def test_engine_versions_order_numerically(older, newer):
    assert engine_info.version_key(older) < engine_info.version_key(newer)


def test_kubeconfig_merge_replaces_its_own_entries_and_keeps_the_rest():
    admin = {
        "clusters": [
            {"name": "default", "cluster": {"server": "https://127.0.0.1:6443", "certificate-authority-data": "Q0E="}}
        ],
        "users": [{"name": "default", "user": {"token": "t0ken"}}],
    }
    current = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "other",
        "clusters": [{"name": "other", "cluster": {}}, {"name": "lab", "cluster": {"server": "https://old"}}],
    }
    cluster, user, refused, left_out = local_kubeconfig.admin_entries(admin)
    assert (refused, left_out) == ([], [])
    merged = local_kubeconfig.merged(current, cluster, user, "https://10.0.0.1:6443", "lab")
    assert [c["name"] for c in merged["clusters"]] == ["other", "lab"]
    assert merged["clusters"][1]["cluster"]["server"] == "https://10.0.0.1:6443"
    assert merged["current-context"] == "other"
    before, after = local_kubeconfig.masked_texts(current, merged)
    assert "t0ken" not in before + after and "******** (new)" in after


def test_a_planted_credential_plugin_proxy_or_skipped_tls_check_is_refused_and_the_file_is_untouched(tmp_path):
    local = tmp_path / "config"
    local.write_text("apiVersion: v1\nkind: Config\nclusters: []\n")
    before = local.read_text()
    admin = {
        "clusters": [
            {
                "name": "default",
                "cluster": {
                    "server": "https://127.0.0.1:6443",
                    "certificate-authority-data": "Q0E=",
                    "proxy-url": "http://evil.example:3128",
                    "insecure-skip-tls-verify": True,
                },
            }
        ],
        "users": [
            {
                "name": "default",
                "user": {
                    "client-certificate-data": "Q0VSVA==",
                    "client-key-data": "S0VZ",
                    "exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "/tmp/pwn"},
                    "auth-provider": {"name": "oidc"},
                },
            }
        ],
    }
    args = {"path": str(local), "server": "https://10.0.0.1:6443", "name": "lab"}
    result = run_module("local_kubeconfig", {**args, "admin_kubeconfig": yaml.safe_dump(admin)})
    assert result["failed"]
    for named in ("cluster proxy-url", "cluster insecure-skip-tls-verify", "user exec", "user auth-provider"):
        assert named in result["msg"], result["msg"]
    assert "/tmp/pwn" not in result["msg"] and local.read_text() == before
    # Other keys are left out (with a warning); a switched-off check that is false is no switch.
    admin["clusters"][0]["cluster"] = {"certificate-authority-data": "Q0E=", "insecure-skip-tls-verify": False}
    admin["users"][0]["user"] = {"token": "t0ken", "as": "system:admin", "tokenFile": "/root/t"}
    result = run_module("local_kubeconfig", {**args, "admin_kubeconfig": yaml.safe_dump(admin)})
    assert not result.get("failed"), result
    written = yaml.safe_load(local.read_text())
    assert written["users"] == [{"name": "lab", "user": {"token": "t0ken"}}]
    assert written["clusters"] == [
        {"name": "lab", "cluster": {"server": "https://10.0.0.1:6443", "certificate-authority-data": "Q0E="}}
    ]
    warnings = json.dumps(result["warnings"])
    assert "user as" in warnings and "user tokenFile" in warnings and "t0ken" not in warnings


def test_an_admin_kubeconfig_without_ca_data_or_credential_is_refused(tmp_path):
    args = {"path": str(tmp_path / "config"), "server": "https://10.0.0.1:6443", "name": "lab"}
    for cluster, user, why in (
        ({"certificate-authority-data": "Q0E="}, {"username": "admin"}, "no client certificate and key, token"),
        ({}, {"token": "t"}, "no certificate-authority-data"),
    ):
        admin = {"clusters": [{"name": "d", "cluster": cluster}], "users": [{"name": "d", "user": user}]}
        result = run_module("local_kubeconfig", {**args, "admin_kubeconfig": yaml.safe_dump(admin)})
        assert result["failed"] and why in result["msg"], result
    assert not (tmp_path / "config").exists()


def test_engine_config_diff_shows_mirrors_and_hides_only_credentials(tmp_path):
    if any(Path(p).exists() for p in ("/etc/rancher", "/var/lib/rancher")):
        pytest.skip("this machine has an engine configuration of its own")
    registries = {
        "mirrors": {"docker.io": {"endpoint": ["https://mirror.example:5000"]}},
        "configs": {"mirror.example:5000": {"auth": {"username": "puller", "password": "hunter2-canary"}}},
    }
    # As Ansible calls it: through its action plugin, which takes the credentials out of the logged arguments.
    payload = {
        **without_credentials({"engine": "k3s", "node_role": "agent", "registries": registries}),
        "_ansible_diff": True,
    }
    result = run_module("engine_config", payload, check_mode=True)
    assert result["changed"] and not Path("/etc/rancher").exists()
    assert "https://mirror.example:5000" in result["changes"][0]["diff"]
    assert "puller" in result["changes"][0]["diff"]
    assert "hunter2-canary" not in json.dumps(result)


def test_engine_config_stages_nothing_for_a_run_that_does_not_hold_the_lock(tmp_path):
    if Path("/var/lib/cargoship/lock.json").exists():
        pytest.skip("this machine has a cargoship lock of its own")
    layout = {
        "config_file": str(tmp_path / "etc" / "config.yaml"),
        "data_dir": str(tmp_path / "data"),
        "private_registry": str(tmp_path / "etc" / "registries.yaml"),
    }
    registries = {"mirrors": {"docker.io": {"endpoint": ["https://mirror.example:5000"]}}}
    args = {"engine": "k3s", "node_role": "agent", "registries": registries, "layout": layout}
    args |= {"state": "staged", "backup_id": "run1", "backup_root": str(tmp_path / "backups")}
    staged = run_module("engine_config", {**args, "lock_run_id": "run1"})
    assert staged["failed"], staged
    assert staged["msg"] == "cannot touch a lock this run does not hold (held by nobody): nothing was written"
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    # The same call without the guard stages the file (so the failure above is the lock's).
    assert run_module("engine_config", args)["changed"]
    assert any(p.name.startswith(".") for p in (tmp_path / "etc").iterdir())


@pytest.mark.parametrize(
    ("selector", "labels", "picked"),
    [
        (None, {"app": "web"}, False),  # a budget without a selector covers nothing
        ({}, {"app": "web"}, True),  # an empty one covers every pod of its namespace (policy/v1)
        ({"match_labels": {"app": "web"}}, {"app": "web", "tier": "1"}, True),
        ({"match_labels": {"app": "web"}}, {"app": "db"}, False),
        ({"match_expressions": [{"key": "app", "operator": "In", "values": ["web", "db"]}]}, {"app": "db"}, True),
        ({"match_expressions": [{"key": "app", "operator": "In", "values": ["web"]}]}, {}, False),
        ({"match_expressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]}, {}, True),
        ({"match_expressions": [{"key": "tier", "operator": "Exists"}]}, {"app": "web"}, False),
        ({"match_expressions": [{"key": "tier", "operator": "DoesNotExist"}]}, {"app": "web"}, True),
    ],
)
def test_budget_selectors_pick_pods_as_the_disruption_controller_does(selector, labels, picked):
    from ansible_collections.cargoship.engine.plugins.module_utils._kube_nodes import selector_matches
    from ansible_collections.cargoship.engine.plugins.module_utils._kube_rest import Resource

    if selector is not None:  # as the API sends a PodDisruptionBudget's spec.selector
        selector = Resource(
            {"matchLabels": selector.get("match_labels"), "matchExpressions": selector.get("match_expressions", [])}
        )
    assert selector_matches(selector, labels) is picked


def test_a_run_releasing_what_it_took_leaves_another_runs_lock_alone(lock):
    run_module("host_lock", {"state": "acquired", "run_id": "a", "path": lock, "holder": {"user": "ann"}})
    refused = run_module("host_lock", {"state": "acquired", "run_id": "b", "path": lock})
    assert refused["locked_by"] == "run a (user=ann)"
    kept = run_module("host_lock", {"state": "released", "run_id": "b", "path": lock, "others": "keep"})
    assert not kept.get("failed") and kept["changed"] is False
    assert json.loads(Path(lock).read_text())["run_id"] == "a"


@pytest.mark.parametrize(
    ("args", "check_mode", "message"),
    [
        ({"state": "released", "name": "w1"}, False, "state=released works on names, not name"),
        ({"state": "drained", "names": ["w1"]}, False, "state=drained works on name, not names"),
        ({"state": "known", "name": "w1"}, False, "state=known works on node_of, not name"),
        (
            {"state": "ready", "name": "w1", "names": ["w2"]},
            False,
            "parameters are mutually exclusive: name|names|node_of",
        ),
        # An option the state does not read is refused, naming it, rather than silently ignored.
        (
            {"state": "labeled", "name": "w1", "owner": "run-1", "timeout": 9},
            False,
            "state=labeled does not use owner, timeout",
        ),
        ({"state": "uncordoned", "name": "w1", "force": True}, False, "state=uncordoned does not use force"),
        ({"state": "ready", "names": ["w1"], "uncordon": True}, False, "state=ready does not use uncordon"),
    ],
)
def test_cluster_node_says_what_each_state_works_on(args, check_mode, message, tmp_path):
    # Refused before any API call: the kubeconfig does not even exist.
    result = run_module("cluster_node", {**args, "kubeconfig": str(tmp_path / "none")}, check_mode=check_mode)
    assert result["failed"] and result["msg"] == message


def tasks_through_ansible(tmp_path, tasks: list[dict], defaults: dict) -> tuple[dict, str]:
    """Each task's registered result by its name, as ansible-playbook on the control host runs the tasks (the
    API options from the kubernetes group's module_defaults; every task may fail), and Ansible's output at -vvv.
    The API token is asserted absent from everything Ansible printed or returned."""
    results = tmp_path / "results.json"
    collect = {"ansible.builtin.set_fact": {"collected": "{{ (collected | default([])) + [out] }}"}}
    steps = [step for task in tasks for step in ({**task, "register": "out", "ignore_errors": True}, collect)]
    steps.append({"ansible.builtin.copy": {"content": "{{ collected | to_json }}", "dest": str(results)}})
    play = {
        "hosts": "localhost",
        "connection": "local",
        "gather_facts": False,
        "module_defaults": {"group/cargoship.engine.kubernetes": defaults},
        "tasks": steps,
    }
    playbook = tmp_path / "tasks.yml"
    playbook.write_text(yaml.safe_dump([play]))
    run = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-vvv", str(playbook)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(REPO / ".collections")},
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert defaults["api_key"] not in run.stdout + run.stderr + results.read_text()
    return dict(zip([t["name"] for t in tasks], json.loads(results.read_text()), strict=True)), run.stdout


def test_cluster_node_runs_in_the_tasks_process_with_the_modules_checks_and_keeps_the_token_out(kube, tmp_path):
    """As Ansible runs it: the action plugin of the name, its options checked as the module's argument spec
    checks them, the API options from the kubernetes group's module_defaults, check mode, failures."""
    kube.node("w1")
    defaults = {"host": kube.access["host"], "ca_cert": kube.access["ca_cert"], "api_key": kube.access["api_key"]}
    tasks = [
        {"name": "label", "cargoship.engine.cluster_node": {"name": "w1", "state": "labeled", "labels": {"a": 1}}},
        {
            "name": "label in check mode",
            "cargoship.engine.cluster_node": {"name": "w1", "state": "labeled", "labels": {"b": "x"}},
            "check_mode": True,
        },
        {"name": "again", "cargoship.engine.cluster_node": {"name": "w1", "state": "labeled", "labels": {"a": 1}}},
        {"name": "unread option", "cargoship.engine.cluster_node": {"name": "w1", "state": "labeled", "owner": "r"}},
        {"name": "no target", "cargoship.engine.cluster_node": {"state": "ready"}},
        {"name": "bad type", "cargoship.engine.cluster_node": {"name": "w1", "state": "ready", "timeout": "soon"}},
        {"name": "no such node", "cargoship.engine.cluster_node": {"name": "w9", "state": "labeled"}},
    ]
    got, output = tasks_through_ansible(tmp_path, tasks, defaults)
    assert "cluster_node.py" not in output, "run as a module (a Python process of its own)"
    assert got["label"]["changed"] and not got["label"].get("failed")
    assert got["label in check mode"]["changed"] and not got["again"]["changed"]
    assert kube.core.read_node("w1").metadata.labels.get("a") == "1"
    assert "b" not in kube.core.read_node("w1").metadata.labels, "check mode labeled the node"
    assert got["unread option"]["failed"] and got["unread option"]["msg"] == "state=labeled does not use owner"
    assert (
        got["no target"]["failed"]
        and "one of the following is required: name, names, node_of" in (got["no target"]["msg"])
    )
    assert got["bad type"]["failed"] and "timeout" in got["bad type"]["msg"]
    assert got["no such node"]["failed"] and "w9" in got["no such node"]["msg"]


def chart_values(kube, namespace: str, name: str, managed: bool = True) -> None:
    """A HelmChartConfig (labelled as cargoship labels its own, or not) and, for a managed one, the AddOn the
    engine keeps for its manifest file."""
    labels = {"app.kubernetes.io/managed-by": "cargoship"} if managed else {}
    kube.product.request(
        "POST",
        f"/apis/helm.cattle.io/v1/namespaces/{namespace}/helmchartconfigs",
        body={"metadata": {"name": name, "namespace": namespace, "labels": labels}, "spec": {"valuesContent": ""}},
    )
    if managed:
        addon = chart_addon_name(name, namespace)
        kube.product.request(
            "POST",
            "/apis/k3s.cattle.io/v1/namespaces/kube-system/addons",
            body={"metadata": {"name": addon, "namespace": "kube-system"}, "spec": {}},
        )


def present(kube) -> dict:
    charts = kube.product.request("GET", "/apis/helm.cattle.io/v1/helmchartconfigs")["items"]
    addons = kube.product.request("GET", "/apis/k3s.cattle.io/v1/namespaces/kube-system/addons")["items"]
    return {
        "charts": sorted(f"{c['metadata']['namespace']}/{c['metadata']['name']}" for c in charts),
        "addons": sorted(a["metadata"]["name"] for a in addons),
    }


def test_helm_chart_configs_runs_in_the_tasks_process_and_deletes_only_what_cargoship_made_and_no_longer_keeps(
    kube, tmp_path
):
    kube.product.request("POST", "/api/v1/namespaces", body={"metadata": {"name": "ingress"}})
    chart_values(kube, "kube-system", "traefik")
    chart_values(kube, "ingress", "nginx")
    chart_values(kube, "kube-system", "someone-elses", managed=False)
    before = present(kube)
    defaults = {"host": kube.access["host"], "ca_cert": kube.access["ca_cert"], "api_key": kube.access["api_key"]}
    tasks = [
        {"name": "assessed", "cargoship.engine.helm_chart_configs": {"keep": []}, "check_mode": True},
        {"name": "pruned", "cargoship.engine.helm_chart_configs": {"keep": ["kube-system/traefik"]}},
        {"name": "again", "cargoship.engine.helm_chart_configs": {"keep": ["kube-system/traefik"]}},
        {"name": "unknown option", "cargoship.engine.helm_chart_configs": {"kept": ["kube-system/traefik"]}},
    ]
    got, output = tasks_through_ansible(tmp_path, tasks, defaults)
    # Ansible names the module file it sends to a Python of its own ("Using module file ..."): none here.
    assert "helm_chart_configs.py" not in output, "run as a module (a Python process of its own)"
    assert got["assessed"]["changed"] and sorted(got["assessed"]["changes"]) == [
        "delete HelmChartConfig ingress/nginx",
        "delete HelmChartConfig kube-system/traefik",
    ]
    assert got["pruned"]["changes"] == ["delete HelmChartConfig ingress/nginx"] and got["pruned"]["changed"]
    assert not got["again"]["changed"] and got["again"]["changes"] == []
    assert got["unknown option"]["failed"] and "kept" in got["unknown option"]["msg"]
    assert present(kube) == {
        "charts": [c for c in before["charts"] if c != "ingress/nginx"],
        "addons": [a for a in before["addons"] if a != chart_addon_name("nginx", "ingress")],
    }


def test_a_dry_runs_api_calls_in_process_check_every_option_at_once_and_keep_the_token_out(kube):
    """plugin_utils/_in_process.py: what a dry run's play assessment calls instead of a module process."""
    kube.node("w1")
    known = in_process("cluster_node", {"state": "known", "node_of": {"w1": "w1"}, **kube.access}, check_mode=True)
    assert not known.get("failed") and known["changed"] is False
    wrong = in_process(
        "cluster_node", {"state": "ready", "name": "w1", "names": ["w1"], "timeout": "soon", **kube.access}, True
    )
    assert wrong["failed"] and "mutually exclusive: name|names" in wrong["msg"] and "timeout" in wrong["msg"]
    # The token also in the server's name, which the failure names: only the result's masking keeps it out.
    token = "not-the-token-" + "x" * 12
    refused = in_process("helm_chart_configs", {"host": f"https://{token}.invalid:1", "api_key": token}, True)
    assert refused["failed"] and "********" in refused["msg"] and token not in json.dumps(refused), refused


def test_a_refusal_in_process_is_worded_as_the_refusal_it_is_not_as_an_unreachable_api(kube):
    """A state's own failure (a controller not stopped, a node not in the cluster) reaches the task as it was
    raised, with what it returns beside its message: a real run's cluster_node tasks run in process, where
    ``fail_json`` raises rather than ending a module process, and the API's own errors are wrapped apart."""
    for name in ("c1", "c2"):
        kube.node(name, labels={"node-role.kubernetes.io/control-plane": "true"})
    kube.kubelet_alive("c2", silent_for=50)
    args = {"state": "drained", "name": "c1", "only_if_safe_to_stop": True, "api_port": kube.port, **kube.access}
    refused = in_process("cluster_node", args, check_mode=False)
    assert refused["failed"] and refused["msg"].startswith("not stopping c1: controller c2 shows Ready"), refused
    assert refused["problems"] and "cannot reach" not in refused["msg"], refused
    missing = in_process("cluster_node", {"state": "uncordoned", "name": "w9", **kube.access}, check_mode=False)
    assert missing["failed"] and "cannot reach" not in missing["msg"] and "w9" in missing["msg"], missing


def test_every_state_of_cluster_node_has_a_handler_that_reads_exactly_its_declared_options():
    """Each state's entry names the options its handler reads; read from the handler's own code (and the
    helpers it calls), so an option a handler starts to read cannot stay refused, nor a dropped one taken."""
    import ast
    import inspect
    import re

    from ansible_collections.cargoship.engine.plugins.module_utils import _cluster_node as cluster_node
    from ansible_collections.cargoship.engine.plugins.module_utils import _kube_nodes

    states = {state for state, _target in cluster_node.STATES}
    assert states == {"drained", "uncordoned", "ready", "labeled", "released", "safe_to_stop", "known"}
    source = inspect.getsource(_kube_nodes)
    functions = {n.name: n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef)}

    def reads(name: str, seen: set) -> set:
        if name in seen or name not in functions:
            return set()
        seen.add(name)
        code = ast.get_source_segment(source, functions[name])
        found = set(re.findall(r"""(?:\bp|params)(?:\[|\.get\()["'](\w+)["']""", code))
        for called in set(re.findall(r"\b(\w+)\(", code)) - {name}:
            found |= reads(called, seen)
        return found

    for (state, target), entry in cluster_node.STATES.items():
        read = reads(entry.handler.__name__, set()) & set(cluster_node.OPTIONS)
        # The waits' API calls also ride out "not yet" answers until the timeout (the module sets it).
        read |= {"timeout"} if state in cluster_node.WAITS else set()
        assert read == set(entry.options), (state, target)


def test_engine_info_runs_on_a_host_without_the_engine():
    result = run_module("engine_info", {"engine": "rke2"})
    assert not result.get("failed"), result
    assert result["installed"] is False and result["services"] == {}


def test_a_step_guarded_by_the_lock_goes_on_only_while_this_run_holds_it(lock):
    from ansible_collections.cargoship.engine.plugins.module_utils._host_lock import touch_if_held

    assert touch_if_held(lock, "a", check_mode=False) == "cannot touch a lock this run does not hold (held by nobody)"
    Path(lock).write_text(json.dumps({"run_id": "b", "holder": {"user": "carol"}}))
    refused = touch_if_held(lock, "a", check_mode=False)
    assert refused.startswith("cannot touch a lock this run does not hold (held by run b (user=carol))")
    os.utime(lock, (0, 0))
    assert touch_if_held(lock, "b", check_mode=True) is None and os.stat(lock).st_mtime == 0
    assert touch_if_held(lock, "b", check_mode=False) is None and os.stat(lock).st_mtime > time.time() - 60
