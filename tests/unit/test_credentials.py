"""Credentials are found by their place in a document, kept out of module arguments and masked in diffs."""

from __future__ import annotations

import json

import pytest
import yaml

from ansible_collections.cargoship.engine.plugins.module_utils import _credentials as cred
from ansible_collections.cargoship.engine.plugins.module_utils._credentials import moved_out as without_credentials
from ansible_collections.cargoship.engine.plugins.module_utils._desired_state import InputError, render, validate
from ansible_collections.cargoship.engine.plugins.module_utils._engine_config import masked_texts, with_credentials

# A quote, a backslash and non-ASCII: JSON and YAML files store these escaped, so searching a file's
# text for the value finds nothing. Each carries a plain marker that no escaping changes.
OLD = 'ol"d\\pässword-OLDMARK'
NEW = 'ne"w\\pässwört-NEWMARK'
REGISTRY = "registry.example:5000"


def registries(password: str, **auth) -> dict:
    return {
        "mirrors": {"docker.io": {"endpoint": ["https://registry.example:5000"]}},
        "configs": {REGISTRY: {"auth": {"username": "puller", "password": password, **auth}}},
    }


def module_params(**args) -> dict:
    """What the module receives: its arguments as the action plugin passes them, defaults filled in."""
    args = without_credentials({"engine": "k3s", **args})
    return {"registries": None, "audit_policy": None, "pod_security": None, "chart_values": None, **args}


def registries_file(password: str, **auth) -> dict:
    state = validate({"engine": "k3s", "registries": registries(password, **auth)})
    return render(state, "agent", False)[0]


def test_the_action_plugin_moves_every_credential_out_of_the_logged_arguments():
    charts = {"app": {"values": {"db": {"password": NEW, "host": "db.example"}, "replicas": 2}}}
    args = without_credentials(
        {"engine": "k3s", "registries": registries(OLD, identity_token="tok-IDMARK"), "chart_values": charts}
    )
    logged = json.dumps({key: value for key, value in args.items() if key != "credentials"})
    assert "OLDMARK" not in logged and "IDMARK" not in logged and "NEWMARK" not in logged
    assert "puller" in logged, "of the registries, only credentials are taken out"
    assert "db.example" not in logged, "a chart's values are taken out whole"
    assert args["credentials"][:2] == [OLD, "tok-IDMARK"]
    # The chart's values: one text, so that none of their leaves (the 2, "db.example") becomes a no-log
    # value that Ansible would mask wherever it appears.
    assert len(args["credentials"]) == 3 and args["credentials"][2].startswith(cred.CHART_VALUES_PREFIX)
    assert "NEWMARK" not in args["credentials"][2]


@pytest.mark.parametrize(
    "values",
    [
        {"s3": {"secretKey": "x-MARK", "accessKey": "y"}, "replicas": 2},
        {"aws_secret_access_key": "x-MARK", "passwords": ["a-MARK", "b"], "pin": 918273},
        "tls.key: x-MARK\nnote: plain\n",
        {"date": "2026-12-04", "ünïcode": "wört", "nested": [[1, None, True]]},
    ],
)
def test_chart_values_of_any_shape_travel_out_of_the_arguments_and_come_back_exactly(values):
    args = without_credentials({"engine": "k3s", "chart_values": {"app": {"namespace": "web", "values": values}}})
    logged = json.dumps({key: value for key, value in args.items() if key != "credentials"})
    assert "MARK" not in logged and "web" in logged
    params = {"registries": None, "audit_policy": None, "pod_security": None, **args}
    assert with_credentials(params)["chart_values"] == {"app": {"namespace": "web", "values": values}}


def test_a_placeholder_for_chart_values_without_its_credential_is_an_error():
    params = module_params(chart_values={"app": {"values": {"a": 1}}})
    params["credentials"] = []
    with pytest.raises(ValueError, match="credential #0 were not passed"):
        with_credentials(params)


@pytest.mark.parametrize(
    ("key", "secret"),
    [
        ("secretKey", True),
        ("accessKey", True),
        ("aws_secret_access_key", True),
        ("tls.key", True),
        ("TLS_CRT", True),
        ("client-cert", True),
        ("htpasswd", True),
        ("apikey", True),
        ("dbPassword", True),
        ("DB-PASSWD", True),
        ("authToken", True),
        ("passwords", True),
        ("replicas", False),
        ("passthrough", False),
        ("keyboardLayout", False),
        ("image", False),
        ("enabled", False),
    ],
)
def test_chart_value_keys_that_name_a_secret_in_any_case_and_separator_style(key, secret):
    assert cred.names_secret(key) is secret


def test_a_diff_masks_chart_values_by_structure_lists_numbers_and_marked_paths_and_keeps_flags():
    def chart(values: object) -> dict:
        state = validate({"engine": "k3s", "chart_values": {"app": {"values": values}}})
        return render(state, "server", True)[0]

    values = {
        "s3": {"secretKey": "sk-MARK", "region": "eu"},
        "tls.key": "tk-MARK",
        "passwords": ["p1-MARK", "p2-MARK"],
        "adminPin": 918273645,
        "auth": {"enabled": True},
        "dashboard": {"note": "note-MARK", "title": "plain"},
        "image": "nginx",
    }
    marked = [["app", "dashboard", "note"]]
    before, after = masked_texts(chart(values), None, marked)
    assert "MARK" not in after and "918273645" not in after
    shown = yaml.safe_load(yaml.safe_load(after)["spec"]["valuesContent"])
    assert shown["s3"] == {"secretKey": cred.ADDED, "region": "eu"}
    assert shown["passwords"] == [cred.ADDED, cred.ADDED] and shown["adminPin"] == cred.ADDED
    assert shown["auth"] == {"enabled": True}, "a flag is a setting"
    assert shown["dashboard"] == {"note": cred.ADDED, "title": "plain"} and shown["image"] == "nginx"
    # The same values given as one text are masked the same way; a marked path of another chart is not.
    text = yaml.safe_dump(values)
    before, after = masked_texts(chart(text), chart(values)["content"], [["other", "dashboard", "note"]])
    assert "918273645" not in before + after
    assert {mark for mark in ("sk-", "tk-", "p1-", "p2-", "note-") if mark + "MARK" in before + after} == {"note-"}
    shown = yaml.safe_load(yaml.safe_load(after)["spec"]["valuesContent"])
    assert shown["s3"]["secretKey"] == cred.MASK, "unchanged, as text or as data"
    assert shown["dashboard"]["note"] == "note-MARK"


def test_values_text_that_is_not_a_mapping_is_refused_without_showing_it():
    for values, why in (("[a-MARK, b]", "reads as a list"), ("a: [MARK", "not valid YAML"), (5, "got a number")):
        with pytest.raises(InputError) as raised:
            validate({"engine": "k3s", "chart_values": {"app": {"values": values}}})
        assert why in str(raised.value) and "MARK" not in str(raised.value)


def test_the_module_gets_the_desired_state_back_exactly():
    charts = {"app": {"values": {"db": {"password": NEW}, "list": [{"token": OLD}]}}}
    params = module_params(registries=registries(OLD, auth="YXV0aA=="), chart_values=charts)
    state = with_credentials(params)
    assert state["registries"] == registries(OLD, auth="YXV0aA==")
    assert state["chart_values"] == charts


def test_a_placeholder_outside_a_credential_place_stays_as_it_is():
    text = "******** cargoship credential #0"
    document = {"configs": {"r.example": {"tls": {"ca_file": text}}}, "mirrors": {"d.io": {"rewrite": {"a": text}}}}
    assert cred.reveal(document, "registries", ["secret"]) == document


def test_a_rotated_password_stored_escaped_shows_as_changed_and_neither_value_shows():
    current = registries_file(OLD)["content"]
    assert "OLDMARK" in current and OLD not in current, "the file stores it escaped"
    before, after = masked_texts(registries_file(NEW), current)
    for text in (before, after):
        assert "OLDMARK" not in text and "NEWMARK" not in text
    assert 'password: "********"' in before
    assert 'password: "******** (changed)"' in after
    assert "username: puller" in after


def test_an_unchanged_password_is_no_change_in_the_diff():
    current = json.dumps(registries(OLD), indent=4, ensure_ascii=False)  # another layout, raw non-ASCII
    item = registries_file(OLD, auth="eDp5")
    before, after = masked_texts(item, current)
    assert "NEWMARK" not in after and "OLDMARK" not in before + after
    assert 'password: "********"' in after
    assert 'auth: "******** (new)"' in after


def test_a_removed_registry_keeps_its_old_password_out_of_the_diff():
    current = registries_file(OLD)["content"]
    emptied = render(validate({"engine": "k3s", "registries": {"mirrors": {}}}), "agent", False)[0]
    before, after = masked_texts(emptied, current)
    assert "OLDMARK" not in before + after
    assert REGISTRY in before


def test_current_content_that_cannot_be_read_is_withheld():
    current = "configs: {registry: {auth: {password: 'OLDMARK'}\n  broken: ["
    before, _after = masked_texts(registries_file(NEW), current)
    assert "OLDMARK" not in before and "not shown" in before


def test_chart_values_named_like_credentials_are_masked_inside_the_manifest():
    def chart(password: str) -> dict:
        state = validate(
            {"engine": "k3s", "chart_values": {"app": {"values": {"adminPassword": password, "replicas": 2}}}}
        )
        return render(state, "server", True)[0]

    before, after = masked_texts(chart(NEW), chart(OLD)["content"])
    assert "OLDMARK" not in before + after and "NEWMARK" not in before + after
    values = yaml.safe_load(yaml.safe_load(after)["spec"]["valuesContent"])
    assert values == {"adminPassword": "******** (changed)", "replicas": 2}


@pytest.mark.parametrize(
    ("path", "secret"),
    [
        (("users", "ops", "user", "token"), True),
        (("users", "ops", "user", "client-key-data"), True),
        (("users", "ops", "user", "exec", "env", "AWS_SECRET", "value"), True),
        (("users", "ops", "user", "exec", "env", "AWS_SECRET", "name"), False),
        (("users", "ops", "user", "auth-provider", "config", "id-token"), True),
        (("users", "ops", "user", "username"), False),
        (("clusters", "c", "cluster", "server"), False),
    ],
)
def test_kubeconfig_credentials_by_place(path, secret):
    assert cred.is_credential("kubeconfig", path) is secret


def test_kubeconfig_entries_are_compared_by_name_not_position():
    before = {"users": [{"name": "a", "user": {"token": "A"}}, {"name": "b", "user": {"token": "B"}}]}
    after = {"users": [{"name": "b", "user": {"token": "B"}}, {"name": "a", "user": {"token": "A2"}}]}
    _masked_before, masked_after = cred.masked_pair("kubeconfig", before, after)
    assert masked_after["users"] == [
        {"name": "b", "user": {"token": cred.MASK}},
        {"name": "a", "user": {"token": cred.CHANGED}},
    ]


def test_a_parse_error_does_not_quote_the_content():
    with pytest.raises(ValueError) as raised:
        cred.parse("password: [OLDMARK\n")
    assert "OLDMARK" not in str(raised.value)
    assert yaml.safe_load("a: 1") == {"a": 1}


def test_numbers_and_flags_under_credential_names_are_settings_not_credentials():
    found: list = []
    values = {"basicAuth": True, "maxAuth": 5, "adminPassword": "pw-MARK"}
    assert cred.hide(values, "chart_values", found) == {
        "basicAuth": True,
        "maxAuth": 5,
        "adminPassword": "******** cargoship credential #0",
    }
    assert found == ["pw-MARK"]


def test_the_user_info_of_an_endpoint_is_masked_in_the_diff_and_a_changed_one_says_so():
    def with_endpoint(endpoint: str) -> dict:
        return {"mirrors": {"docker.io": {"endpoint": [endpoint, "https://plain.example"]}}}

    before, after = cred.masked_pair(
        "registries",
        with_endpoint("https://puller:old-MARK@m.example:5000"),
        with_endpoint("https://puller:new-MARK@m.example:5000"),
    )
    assert before["mirrors"]["docker.io"]["endpoint"] == ["https://********@m.example:5000", "https://plain.example"]
    assert after["mirrors"]["docker.io"]["endpoint"][0] == "https://******** (changed)@m.example:5000"
    same = cred.masked_pair("registries", with_endpoint("u:pw-MARK@m.example:5000"), None)[0]
    assert same["mirrors"]["docker.io"]["endpoint"][0] == "********@m.example:5000"
    # Chart values alike: a URL with user-info anywhere in a text.
    shown = cred.masked({"db": {"url": "see postgres://app:pw-MARK@db:5432/app"}}, "chart_values")
    assert shown == {"db": {"url": "see postgres://********@db:5432/app"}}


def test_an_endpoint_with_user_info_travels_out_of_the_logged_arguments_and_comes_back():
    endpoint = "https://puller:pw-MARK@m.example:5000"
    document = {"mirrors": {"docker.io": {"endpoint": [endpoint, "https://plain.example"]}}}
    args = without_credentials({"engine": "k3s", "registries": document})
    logged = json.dumps({key: value for key, value in args.items() if key != "credentials"})
    assert "MARK" not in logged and "https://plain.example" in logged
    assert args["credentials"] == [endpoint]
    assert with_credentials(module_params(registries=document))["registries"] == document
