"""The control-host modules find the API as kubernetes.core's modules do: option, K8S_AUTH_*, KUBECONFIG."""

from __future__ import annotations

import os

import pytest
import yaml
from ansible.module_utils.basic import env_fallback

from ansible_collections.cargoship.engine.plugins.module_utils import _kube_access as ka


def kubeconfig(path, *servers, current=None):
    """A kubeconfig with one context per server, named c0, c1..., each with its own token."""
    names = [f"c{i}" for i in range(len(servers))]
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": n, "cluster": {"server": s}} for n, s in zip(names, servers, strict=True)],
                "users": [{"name": n, "user": {"token": f"token-{n}"}} for n in names],
                "contexts": [{"name": n, "context": {"cluster": n, "user": n}} for n in names],
                "current-context": current or names[0],
            }
        )
    )
    return path


def bearer(configuration) -> str:
    """The Authorization header the client sends."""
    return configuration.auth_settings()["BearerToken"]["value"]


def params(**given):
    """The module's parameters as Ansible resolves them: given, else the environment fallback."""
    resolved = {}
    for name, spec in ka.ARGUMENT_SPEC.items():
        value = given.get(name)
        if value is None and "fallback" in spec:
            try:
                value = spec["fallback"][0](*spec["fallback"][1])
            except Exception:  # AnsibleFallbackNotFound: not in the environment
                value = None
        resolved[name] = value if value is not None else spec.get("default")
    return resolved


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch, tmp_path):
    for name in ["KUBECONFIG", *(v for spec in ka.ARGUMENT_SPEC.values() for v in spec.get("fallback", ((), ()))[1])]:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def test_the_fallbacks_are_kubernetes_cores_variable_names():
    """kubernetes.core's options come from its variables; the other servers (cargoship's own) from none."""
    assert "fallback" not in ka.ARGUMENT_SPEC["fallback_hosts"]
    kubernetes_core = {name: spec for name, spec in ka.ARGUMENT_SPEC.items() if name != "fallback_hosts"}
    assert {name: spec["fallback"][1][0] for name, spec in kubernetes_core.items()} == {
        "kubeconfig": "K8S_AUTH_KUBECONFIG",
        "context": "K8S_AUTH_CONTEXT",
        "host": "K8S_AUTH_HOST",
        "api_key": "K8S_AUTH_API_KEY",
        "ca_cert": "K8S_AUTH_SSL_CA_CERT",
        "client_cert": "K8S_AUTH_CERT_FILE",
        "client_key": "K8S_AUTH_KEY_FILE",
        "validate_certs": "K8S_AUTH_VERIFY_SSL",
    }
    assert all(spec["fallback"][0] is env_fallback for spec in kubernetes_core.values())
    assert ka.ARGUMENT_SPEC["api_key"]["no_log"] is True


def test_kubeconfig_comes_from_kubeconfig_env_and_several_files_are_merged(tmp_path, monkeypatch):
    first = kubeconfig(tmp_path / "a.yaml", "https://first:6443")
    second = tmp_path / "b.yaml"
    second.write_text(
        yaml.safe_dump(
            {
                "clusters": [{"name": "other", "cluster": {"server": "https://second:6443"}}],
                "users": [{"name": "other", "user": {"token": "t2"}}],
                "contexts": [{"name": "other", "context": {"cluster": "other", "user": "other"}}],
            }
        )
    )
    monkeypatch.setenv("KUBECONFIG", f"{first}:{second}")
    assert ka.api_client(params()).configuration.host == "https://first:6443"
    merged = ka.api_client(params(context="other")).configuration
    assert merged.host == "https://second:6443"
    assert bearer(merged) == "Bearer t2"


def test_the_option_wins_over_k8s_auth_kubeconfig_which_wins_over_kubeconfig(tmp_path, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig(tmp_path / "env.yaml", "https://from-kubeconfig:6443")))
    monkeypatch.setenv("K8S_AUTH_KUBECONFIG", str(kubeconfig(tmp_path / "k8s.yaml", "https://from-k8s-auth:6443")))
    assert ka.api_client(params()).configuration.host == "https://from-k8s-auth:6443"
    option = kubeconfig(tmp_path / "opt.yaml", "https://from-option:6443")
    assert ka.api_client(params(kubeconfig=str(option))).configuration.host == "https://from-option:6443"


def test_a_context_picks_its_cluster_and_user(tmp_path, monkeypatch):
    path = kubeconfig(tmp_path / "k.yaml", "https://zero:6443", "https://one:6443")
    monkeypatch.setenv("K8S_AUTH_CONTEXT", "c1")
    configuration = ka.api_client(params(kubeconfig=str(path))).configuration
    assert configuration.host == "https://one:6443"
    assert bearer(configuration) == "Bearer token-c1"
    assert "context c1" in ka.describe(params(kubeconfig=str(path)))


def test_an_unknown_context_is_an_error_naming_it(tmp_path):
    path = kubeconfig(tmp_path / "k.yaml", "https://zero:6443")
    with pytest.raises(Exception, match="nope"):
        ka.api_client(params(kubeconfig=str(path), context="nope"))


def test_k8s_auth_host_and_token_stand_alone_without_a_kubeconfig(tmp_path, monkeypatch):
    ca = tmp_path / "ca.crt"
    ca.write_text("not read until a connection is made")
    monkeypatch.setenv("K8S_AUTH_HOST", "https://api.example:6443")
    monkeypatch.setenv("K8S_AUTH_API_KEY", "sekret")
    monkeypatch.setenv("K8S_AUTH_SSL_CA_CERT", str(ca))
    monkeypatch.setenv("K8S_AUTH_VERIFY_SSL", "false")
    resolved = params()
    assert resolved["validate_certs"] == "false"  # Ansible converts it to a bool for the module
    resolved["validate_certs"] = False
    configuration = ka.api_client(resolved).configuration
    assert configuration.host == "https://api.example:6443"
    assert bearer(configuration) == "Bearer sekret"
    assert configuration.ssl_ca_cert == str(ca)
    assert configuration.verify_ssl is False
    assert ka.describe(resolved) == "host https://api.example:6443"
    assert "sekret" not in ka.describe(resolved)


def test_k8s_auth_host_overrides_the_kubeconfigs_server(tmp_path):
    path = kubeconfig(tmp_path / "k.yaml", "https://zero:6443")
    configuration = ka.api_client(params(kubeconfig=str(path), host="https://override:6443")).configuration
    assert configuration.host == "https://override:6443"
    assert bearer(configuration) == "Bearer token-c0"
    replaced = ka.api_client(params(kubeconfig=str(path), api_key="other")).configuration
    assert bearer(replaced) == "Bearer other"
    assert bearer(configuration) == "Bearer token-c0"


def test_a_missing_kubeconfig_is_named(tmp_path):
    with pytest.raises(ValueError, match=r"no kubeconfig file at .*missing\.yaml"):
        ka.api_client(params(kubeconfig=str(tmp_path / "missing.yaml")))


def test_without_any_kubeconfig_or_host_the_in_cluster_account_is_tried_in_a_pod(tmp_path, monkeypatch):
    # No ~/.kube/config, no KUBECONFIG, and no pod: the missing file is named, with where to name one.
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(ValueError, match=r"no such file, and this is not a pod.*cargoship_api_kubeconfig"):
        ka.api_client(params())
    # In a pod (the API's service address in its environment), the pod's service account is what is left.
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.43.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    with pytest.raises(Exception, match=r"[Ss]ervice token file does not exist"):
        ka.api_client(params())


# -- the plain connection (no kubernetes package) for tokens and client certificates ---------------------


def one_context(path, cluster: dict, user: dict):
    path.write_text(
        yaml.safe_dump(
            {
                "clusters": [{"name": "k", "cluster": cluster}],
                "users": [{"name": "k", "user": user}],
                "contexts": [{"name": "k", "context": {"cluster": "k", "user": "k"}}],
                "current-context": "k",
            }
        )
    )
    return str(path)


def test_token_and_certificate_kubeconfigs_connect_without_the_package_and_others_use_it(tmp_path):
    server = {"server": "https://api.example:6443"}
    plain = {
        "token": {"token": "t"},
        "client certificate": {"client-certificate": "/c.crt", "client-key": "/c.key"},
    }
    for what, user in plain.items():
        client = ka.api_client(params(kubeconfig=one_context(tmp_path / "k.yaml", server, user)))
        assert isinstance(client, ka.PlainClient), what
    # What only the kubernetes package does: credential plugins, a proxy, a context's namespace...
    package = {
        "exec": ({}, {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "get-token"}}),
        "auth-provider": ({}, {"auth-provider": {"name": "oidc", "config": {}}}),
        "proxy": ({"proxy-url": "http://proxy:3128"}, {"token": "t"}),
        "server name": ({"tls-server-name": "api"}, {"token": "t"}),
    }
    for what, (cluster, user) in package.items():
        path = one_context(tmp_path / "k.yaml", {**server, **cluster}, user)
        assert ka.plain_settings(params(kubeconfig=path)) is None, what
    first, second = (one_context(tmp_path / n, server, {"token": "t"}) for n in ("a.yaml", "b.yaml"))
    assert ka.plain_settings(params(kubeconfig=first)) is not None
    os.environ["KUBECONFIG"] = f"{first}:{second}"  # several files are merged by the package's rules
    try:
        assert ka.plain_settings(params()) is None
    finally:
        del os.environ["KUBECONFIG"]


def test_the_plain_connection_reads_the_kubeconfig_as_kubectl_does(tmp_path):
    (tmp_path / "certs").mkdir()
    (tmp_path / "certs" / "ca.crt").write_text("CA")
    (tmp_path / "token").write_text("from-a-file\n")
    cluster = {"server": "https://api.example:6443", "certificate-authority": "certs/ca.crt"}
    path = one_context(tmp_path / "k.yaml", cluster, {"tokenFile": "token"})
    settings = ka.plain_settings(params(kubeconfig=path))
    # Relative paths are the kubeconfig's directory's; a token file is read.
    assert settings.ssl_ca_cert == str(tmp_path / "certs" / "ca.crt")
    assert bearer(settings) == "Bearer from-a-file"
    insecure = one_context(tmp_path / "i.yaml", {**cluster, "insecure-skip-tls-verify": True}, {"token": "t"})
    assert ka.plain_settings(params(kubeconfig=insecure)).verify_ssl is False
    assert ka.plain_settings(params(kubeconfig=insecure, validate_certs=True)).verify_ssl is True


def test_client_certificate_data_is_loaded_and_leaves_no_file_behind(tmp_path, monkeypatch):
    import base64
    import types

    import labctl

    lab = types.SimpleNamespace(hosts=[], state=tmp_path, token="unit", node_token="unit-node")
    labctl.make_certificates(lab)  # a CA, and a certificate with its key to stand for a user's
    data = {
        name: base64.b64encode((tmp_path / name).read_bytes()).decode()
        for name in ("ca.crt", "apiserver.crt", "apiserver.key")
    }
    cluster = {"server": "https://api.example:6443", "certificate-authority-data": data["ca.crt"]}
    user = {"client-certificate-data": data["apiserver.crt"], "client-key-data": data["apiserver.key"]}
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(ka.tempfile, "tempdir", None)
    client = ka.api_client(params(kubeconfig=one_context(tmp_path / "k.yaml", cluster, user)))
    context = client.rest_client.pool_manager.tls()
    assert context.verify_mode == ka.ssl.CERT_REQUIRED and context.check_hostname
    assert context.cert_store_stats()["x509_ca"] == 1
    assert list(scratch.iterdir()) == [], "the key written to load it is still on disk"
    with pytest.raises(ka.ssl.SSLError):  # a key that is not the certificate's is refused, as kubectl does
        other = {
            **user,
            "client-key-data": base64.b64encode(
                b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"
            ).decode(),
        }
        ka.api_client(
            params(kubeconfig=one_context(tmp_path / "k.yaml", cluster, other))
        ).rest_client.pool_manager.tls()
    assert list(scratch.iterdir()) == []
