from __future__ import annotations

import pytest
import yaml

from ansible_collections.cargoship.engine.plugins.module_utils import _desired_state as ds

POLICY = {"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "rules": [{"level": "Metadata"}]}
PSA = {"apiVersion": "apiserver.config.k8s.io/v1", "kind": "AdmissionConfiguration", "plugins": []}
REGISTRIES = {
    "mirrors": {"docker.io": {"endpoint": ["https://mirror.example:5000"]}},
    "configs": {"mirror.example:5000": {"auth": {"username": "u", "password": "s3cret-value"}}},
}


def state(**overrides):
    return ds.validate({"engine": "k3s", "registries": REGISTRIES, **overrides})


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"engine": "k8s"}, "cargoship_engine: must be one of k3s, rke2"),
        (
            {"registries": {"mirrors": {"docker.io": {"endpont": []}}}},
            "cargoship_registries.mirrors[\"docker.io\"].endpont: unknown key (did you mean 'endpoint'?)",
        ),
        ({"registries": {"mirrors": {"docker.io": {"endpoint": "https://x"}}}}, ".endpoint: expected a list"),
        ({"registries": {"mirrors": {"docker.io": {"endpoint": ["ftp://x"]}}}}, "not an endpoint"),
        ({"registries": {"mirrors": {"docker.io": {"endpoint": ["user:pw@mirror"]}}}}, "for https): '…@mirror'"),
        ({"registries": {"mirrors": {"docker.io": {"endpoint": ["mirror example"]}}}}, "not an endpoint"),
        (
            {"registries": {"configs": {"r": {"auth": {"identitytoken": "t"}}}}},
            "auth.identitytoken: unknown key (did you mean 'identity_token'?)",
        ),
        ({"registries": {"configs": {"r": {"auth": {"token": "t"}}}}}, "auth.token: unknown key"),
        ({"registries": {"mirror": {}}}, "cargoship_registries.mirror: unknown key (did you mean 'mirrors'?)"),
        ({"registries": {"configs": {"r": {"tls": {"insecure_skip_verify": "yes"}}}}}, "expected true or false"),
        ({"audit_policy": {"kind": "Policy"}}, "cargoship_audit_policy: must be a Policy"),
        ({"chart_values": {"../../etc": {"values": {}}}}, "chart name must be a DNS label"),
        ({"chart_values": {"traefik.v2": {"values": {}}}}, "no dots"),
        ({"chart_values": {"traefik": {}}}, "cargoship_chart_values.traefik.values: required"),
        (
            {"chart_values": {"a-b": {"namespace": "c", "values": {}}, "b": {"namespace": "c-a", "values": {}}}},
            "collides",
        ),
    ],
)
def test_bad_input_is_rejected_naming_the_key_path(overrides, message):
    with pytest.raises(ds.InputError) as error:
        state(**overrides)
    assert message in str(error.value)


def test_the_engines_own_registry_schema_is_accepted():
    registries = {
        "mirrors": {
            "*": {},
            "docker.io": {"endpoint": ["mirror.example:5000", "https://other.example/v2", "[fd00::1]:5000"]},
            "quay.io": {"endpoint": ["http://10.0.0.1:5000"], "rewrite": {"^library/(.*)": "mirrored/$1"}},
        },
        "configs": {
            "mirror.example:5000": None,
            "other.example": {"auth": {"identity_token": "t"}, "tls": {"ca_file": "/etc/ssl/ca.pem"}},
        },
    }
    assert ds.validate({"engine": "k3s", "registries": registries})["registries"] == registries
    rendered = ds.render(ds.validate({"engine": "k3s", "registries": registries}), "agent", False)[0]
    assert yaml.safe_load(rendered["content"]) == registries
    assert '  "*": {}\n' in rendered["content"] and "  mirror.example:5000: null\n" not in rendered["content"]


def test_names_that_differ_only_in_namespace_do_not_collide():
    ds.validate({"engine": "k3s", "chart_values": {"x": {"values": {}}, "y": {"namespace": "apps", "values": {}}}})


def test_workers_get_registries_only():
    files = ds.render(state(audit_policy=POLICY, pod_security=PSA), "agent", with_charts=True)
    assert [f["path"] for f in files] == ["/etc/rancher/k3s/registries.yaml"]


def test_k3s_server_enables_audit_and_psa_through_apiserver_args():
    files = {f["kind"]: f for f in ds.render(state(audit_policy=POLICY, pod_security=PSA), "server", with_charts=False)}
    dropin = yaml.safe_load(files["config"]["content"])
    assert dropin == {
        "kube-apiserver-arg+": [
            "audit-policy-file=/var/lib/rancher/k3s/server/cargoship-audit-policy.yaml",
            "audit-log-path=/var/lib/rancher/k3s/server/logs/audit.log",
            # Bounded as the k3s hardening guide bounds them: without these, rotated logs pile up.
            "audit-log-maxage=30",
            "audit-log-maxbackup=10",
            "audit-log-maxsize=100",
            "admission-control-config-file=/var/lib/rancher/k3s/server/cargoship-pod-security.yaml",
        ]
    }
    assert all(f["restart"] for f in files.values())


def test_audit_log_retention_can_be_set_and_rke2_keeps_its_own_unless_told():
    k3s = ds.render(state(audit_policy=POLICY, audit_log={"maxage": 7}), "server", with_charts=False)
    args = yaml.safe_load(next(f for f in k3s if f["kind"] == "config")["content"])["kube-apiserver-arg+"]
    assert [a for a in args if a.startswith("audit-log-max")] == [
        "audit-log-maxage=7",
        "audit-log-maxbackup=10",
        "audit-log-maxsize=100",
    ]
    rke2 = ds.render(state(engine="rke2", audit_policy=POLICY, audit_log={"maxsize": 50}), "server", with_charts=False)
    dropin = yaml.safe_load(next(f for f in rke2 if f["kind"] == "config")["content"])
    assert dropin["kube-apiserver-arg+"] == ["audit-log-maxsize=50"]
    with pytest.raises(ds.InputError, match=r"cargoship_audit_log\.max_age: unknown key"):
        state(audit_log={"max_age": 7})
    with pytest.raises(ds.InputError, match="expected a whole number"):
        state(audit_log={"maxage": "7d"})


def test_rke2_server_uses_its_top_level_keys():
    files = {f["kind"]: f for f in ds.render(state(engine="rke2", audit_policy=POLICY), "server", with_charts=False)}
    assert yaml.safe_load(files["config"]["content"]) == {
        "audit-policy-file": "/var/lib/rancher/rke2/server/cargoship-audit-policy.yaml"
    }
    assert files["registries"]["path"] == "/etc/rancher/rke2/registries.yaml"


def test_chart_values_render_as_helmchartconfig_without_restart():
    files = ds.render(state(chart_values={"traefik": {"values": {"replicas": 2}}}), "server", with_charts=True)
    chart = next(f for f in files if f["kind"] == "chart_values")
    assert chart["path"] == "/var/lib/rancher/k3s/server/manifests/cargoship-traefik.yaml"
    assert chart["restart"] is False
    document = yaml.safe_load(chart["content"])
    assert document["kind"] == "HelmChartConfig" and yaml.safe_load(document["spec"]["valuesContent"]) == {
        "replicas": 2
    }
    assert not any(
        f["kind"] == "chart_values" for f in ds.render(state(chart_values={"t": {"values": {}}}), "server", False)
    )


def test_rendering_is_stable():
    assert ds.render(state(audit_policy=POLICY), "server", True) == ds.render(
        state(audit_policy=POLICY), "server", True
    )


def test_a_file_holding_the_desired_content_in_another_layout_is_the_same():
    state = ds.validate(
        {
            "engine": "k3s",
            "registries": {
                "mirrors": {"docker.io": {"endpoint": ["https://mirror.example:5000"]}},
                "configs": {"mirror.example:5000": {"tls": {"insecure_skip_verify": False}}},
            },
        }
    )
    desired = ds.render(state, "agent", False)[0]
    by_hand = (
        "# written by hand, keys in another order\n"
        "configs:\n"
        "  'mirror.example:5000':\n"
        "    tls: {insecure_skip_verify: no}\n"
        "mirrors:\n"
        "  docker.io:\n"
        "    endpoint: [https://mirror.example:5000]\n"
    )
    older_cargoship = '{"configs": {"mirror.example:5000": {"tls": {"insecure_skip_verify": false}}},'
    older_cargoship += ' "mirrors": {"docker.io": {"endpoint": ["https://mirror.example:5000"]}}}'
    assert ds.same_content("registries", by_hand, desired["content"])
    assert ds.same_content("registries", older_cargoship, desired["content"])
    assert not ds.same_content("registries", by_hand.replace("5000]", "5001]"), desired["content"])
    assert not ds.same_content("registries", "mirrors: [", desired["content"])
    assert not ds.same_content("registries", None, desired["content"])
    assert desired["content"].startswith("# Managed by cargoship")


def test_chart_values_compare_by_what_the_values_say():
    state = ds.validate(
        {"engine": "k3s", "chart_values": {"traefik": {"values": {"replicas": 2, "ports": {"web": 80}}}}}
    )
    desired = ds.render(state, "server", True)[0]
    document = yaml.safe_load(desired["content"])
    document["spec"]["valuesContent"] = "ports: {web: 80}\nreplicas: 2\n"
    assert ds.same_content("chart_values", yaml.safe_dump(document), desired["content"])
    document["spec"]["valuesContent"] = "ports: {web: 81}\nreplicas: 2\n"
    assert not ds.same_content("chart_values", yaml.safe_dump(document), desired["content"])
