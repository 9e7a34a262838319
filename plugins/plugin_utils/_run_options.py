# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every inventory variable cargoship reads, written once: its kind, its default, what it means and which
phase roles take it.

Everything else follows from this table (``make docs`` writes it out, and the unit tests fail when a
copy is stale):

- the input validation (``validate_input``) checks each variable by its kind before any host is touched;
- each role whose files read a variable with a default gets that default in ``defaults/main.yml``
  (role defaults rank below every inventory source, so a user's value always wins);
- each phase role's ``meta/argument_specs.yml`` lists the variables it takes, with type, default and
  description;
- docs/engine-config-sync.md's settings table;
- the declared reads (``_reads``), the dry run's assessment (``_dry_run``) and the playbooks' play-level
  keywords (the ``cargoship.engine.run_option_default`` lookup) take their defaults from here.

Descriptions use Ansible's documentation markup (C(), V(), O()); the docs page shows it as code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ansible_collections.cargoship.engine.plugins.module_utils._desired_state import VARIABLES
from ansible_collections.cargoship.engine.plugins.plugin_utils._phase_rules import truthy


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET = _Unset()  # no default: the variable is optional (left out when not given) or required

# A kind as validate_input checks it -> the argument spec type it stands for.
SPEC_TYPES = {
    "bool": "bool",
    "int": "int",
    "timeout": "int",
    "str": "str",
    "path": "path",
    "profile": "str",
    "concurrency": "raw",
    "hooks": "dict",
    "phase": "str",
    "secret_paths": "list",
    "desired": "raw",
    "engine": "str",
    "restart": "str",
}
GROUPS = ("desired state", "fleet", "rollout", "Kubernetes API", "lock", "local kubeconfig", "run")


@dataclass(frozen=True)
class Option:
    name: str
    kind: str
    group: str
    description: str
    default: object = UNSET
    # How the docs describe a default that is worked out at run time (no fixed value).
    default_text: str = ""
    # The phase roles (or role:entry point) whose argument specs list it; the playbooks that read it.
    roles: tuple[str, ...] = ()
    playbooks: tuple[str, ...] = ()
    required: bool = False
    spec: dict = field(default_factory=dict)  # more argument spec keys (choices, elements)


SYNC = ("sync_controller", "sync_worker")
# A wait's own words on 0, which kubectl drain --timeout reads as "no limit" (validate_input refuses it).
NOT_ZERO = " At least 1: 0 would give up at once (it does not mean no limit)."


def _desired(key: str, description: str, **more) -> Option:
    return Option(VARIABLES[key], "desired", "desired state", description, roles=SYNC, **more)


OPTIONS: tuple[Option, ...] = (
    Option(
        VARIABLES["engine"],
        "engine",
        "desired state",
        "The engine the fleet runs: V(k3s) or V(rke2).",
        roles=("disconnect", "engine_facts", "kubeconfig", *SYNC),
        playbooks=("recover",),
        required=True,
        spec={"choices": ["k3s", "rke2"]},
    ),
    _desired(
        "registries",
        "C(registries.yaml) content in the engine's own schema: C(mirrors.<registry>.endpoint) (a list; an "
        "endpoint without a scheme is https) and C(.rewrite), C(configs.<registry>.auth) (C(username), "
        "C(password), C(auth), C(identity_token)) and C(.tls) (C(ca_file), C(cert_file), C(key_file), "
        "C(insecure_skip_verify)). V(*) names every registry; a C(configs) entry may be empty, and a mirror "
        "with no settings (the embedded registry's form) is written as given. A key the engine would ignore is "
        "an error, with a did-you-mean. Credentials are secrets. V(absent) removes the file cargoship wrote; "
        "left unset, the hosts' file stays as it is.",
    ),
    _desired(
        "audit_policy",
        "The audit C(Policy) document, on controllers (k3s: through C(kube-apiserver-arg), RKE2: "
        "C(audit-policy-file)); its levels and stages are checked as the API server checks them. V(absent) "
        "removes cargoship's; left unset, it stays as it is.",
    ),
    _desired(
        "audit_log",
        "Audit log retention with the audit policy: C(maxage) (days), C(maxbackup) (files), C(maxsize) (MB). On "
        "k3s, which keeps audit logs for ever otherwise, unset keys take the k3s hardening guide's 30, 10 and "
        "100; RKE2 keeps its own retention unless this sets it.",
        spec={"type": "dict"},
    ),
    _desired(
        "pod_security",
        "The pod-security C(AdmissionConfiguration) document, on controllers (k3s: "
        "C(admission-control-config-file), RKE2: C(pod-security-admission-config-file)); its levels "
        "(C(privileged), C(baseline), C(restricted)), versions (C(latest), C(v1.N)) and exemptions are checked. "
        "V(absent) removes cargoship's; left unset, it stays as it is.",
    ),
    _desired(
        "chart_values",
        "Chart name to C(values) (a mapping, or the YAML text of one) and an optional C(namespace), or "
        "V(absent), written as HelmChartConfig manifests on every controller. A chart given as V(absent), or no "
        "longer listed, is removed from every controller and through the API; V(absent) as a whole removes "
        "every chart's values cargoship wrote; left unset, they stay as they are. The values never reach a "
        "host's log; diffs and the report mask every value under a key named like a secret (secret, key, "
        "token, password, certificate, in any case and separator style).",
    ),
    Option(
        "cargoship_secret_paths",
        "secret_paths",
        "desired state",
        "More chart values to mask in diffs and the report: a list of paths, each the chart's name (or V(*)) "
        "and the keys below its values, as V(traefik.dashboard.note) or, for a key with a dot, "
        "V([traefik, tls.key]); V(*) stands for any one key or list item.",
        roles=SYNC,
        spec={"elements": "raw"},
    ),
    Option(
        "cargoship_controllers_group",
        "str",
        "fleet",
        "The inventory group of the controllers (servers); set it wherever variables are set (inventory, "
        "group_vars, host_vars, C(-e)).",
        default="controllers",
        roles=("fleet",),
    ),
    Option(
        "cargoship_workers_group",
        "str",
        "fleet",
        "The inventory group of the workers (agents), likewise.",
        default="workers",
        roles=("fleet",),
    ),
    Option(
        "cargoship_profile",
        "profile",
        "fleet",
        "The host's profile (a lower-case DNS label, e.g. V(infrastructure)), usually given by a profile group "
        "in the inventory; the label_nodes phase labels the node C(node-role.kubernetes.io/<profile>).",
        roles=("host_facts", "label_nodes"),
    ),
    Option(
        "cargoship_engine_version",
        "str",
        "fleet",
        "The version the fleet should run; a host with a newer installed version stops the run.",
        roles=("engine_facts",),
    ),
    Option(
        "cargoship_pod_security_over_cis",
        "bool",
        "fleet",
        "Replace the rancher-restricted pod-security admission file of RKE2 servers running C(profile: cis) "
        "with O(cargoship_pod_security). Without it, such a server stops the run before anything changes.",
        default=False,
        roles=("engine_facts",),
    ),
    Option(
        "cargoship_work_concurrency",
        "concurrency",
        "rollout",
        "How many workers are synced at once: a count (V(2)) or a percentage of the workers (V(25%)). "
        "Controllers always go one at a time.",
        default=1,
        playbooks=("engine_config_sync", "recover"),
    ),
    Option(
        "cargoship_drain_timeout",
        "timeout",
        "rollout",
        "Seconds a drain may take (evictions a PodDisruptionBudget refuses are retried every 5 s) before the "
        "node is uncordoned, untouched, and the run fails." + NOT_ZERO,
        default=300,
        roles=SYNC,
    ),
    Option(
        "cargoship_drain_force",
        "bool",
        "rollout",
        "Also evict pods without a controller (gone for good); without it such a node is not drained and the "
        "run fails.",
        default=False,
        roles=SYNC,
    ),
    Option(
        "cargoship_allow_etcd_quorum_loss",
        "bool",
        "rollout",
        "Let a controller stop although etcd would lose its quorum without it, as in a cluster of two etcd "
        "members; its API is unavailable until the controller is back. Without it such a controller is not "
        "touched and the run fails.",
        default=False,
        roles=("sync_controller",),
    ),
    Option(
        "cargoship_service_timeout",
        "timeout",
        "rollout",
        "Seconds the engine may take to stop, or to start and settle (its own unit would wait for ever)." + NOT_ZERO,
        default=300,
        roles=SYNC,
    ),
    Option(
        "cargoship_engine_settle",
        "int",
        "rollout",
        "Seconds a started engine must stay active, without a restart, before its node is checked.",
        default=10,
        roles=SYNC,
    ),
    Option(
        "cargoship_ready_timeout",
        "timeout",
        "rollout",
        "Seconds to wait for a restarted node to be Ready, as reported by a kubelet started after the stop "
        "(and for the cluster to be ready before the hooks of the cluster_ready stage)." + NOT_ZERO,
        default=180,
        roles=(*SYNC, "hooks:cluster_ready"),
    ),
    Option(
        "cargoship_proof_timeout",
        "timeout",
        "rollout",
        "Seconds to wait, once a restarted node is Ready, for the Kubernetes API to show the evidence that its "
        "engine loaded what was written (its node-args annotation, RKE2's apiserver mirror pod); a node not "
        "proven by then is rolled back." + NOT_ZERO,
        default=60,
        roles=SYNC,
    ),
    Option(
        "cargoship_restart",
        "restart",
        "rollout",
        "How a node whose engine must restart is taken out of service: V(drain) (cordon and drain it first, "
        "then restart) or V(in_place) (restart the engine without a drain: k3s and RKE2 stop only their own "
        "process, the pods' containers keep running). A node whose engine is not running is always drained. "
        "Chart values alone never restart a node.",
        default="drain",
        roles=SYNC,
        spec={"choices": ["drain", "in_place"]},
    ),
    Option(
        "cargoship_pause_between_nodes",
        "int",
        "rollout",
        "Seconds to wait after a node (a batch of workers) was changed before the next one is started on.",
        default=0,
        roles=SYNC,
    ),
    Option(
        "cargoship_plan_out",
        "path",
        "run",
        "With a dry run: write the plan (what was found on each host and what would be done) to this file, "
        "to apply it later, exactly, with O(cargoship_plan_file).",
        playbooks=("engine_config_sync",),
    ),
    Option(
        "cargoship_plan_file",
        "path",
        "run",
        "Apply this reviewed plan: the run is refused, before anything is changed, if a host, a file, a node or "
        "the inventory's desired state is not what the plan was made from, and each node is checked again "
        "before it is touched.",
        roles=("connect", *SYNC),
        playbooks=("engine_config_sync",),
    ),
    Option(
        "cargoship_plan_digest",
        "str",
        "run",
        "With O(cargoship_plan_file): the digest of the plan that was reviewed; any other plan is refused.",
        roles=("connect", *SYNC),
    ),
    Option(
        "cargoship_force",
        "bool",
        "rollout",
        "Restart nodes even when their configuration already matches. With the unlock phase run alone "
        "(C(cargoship phase run unlock --force)): break the lock whoever holds it.",
        default=False,
        roles=(*SYNC, "unlock"),
    ),
    Option(
        "cargoship_max_clock_skew",
        "int",
        "rollout",
        "The largest clock difference, in seconds, allowed between a host and the control host (the time the"
        " call to the host took is not counted as difference).",
        default=30,
        roles=("validate_hosts",),
    ),
    Option(
        "cargoship_api_kubeconfig",
        "path",
        "Kubernetes API",
        "The kubeconfig on the control host used to drain, watch and label nodes; else C(K8S_AUTH_KUBECONFIG), "
        "else C(KUBECONFIG) (several files merged, as kubectl does), else C(~/.kube/config). When the API server "
        "it names gives no answer at all, the calls go to the other controllers' API servers (their "
        "C(ansible_host), with its port, CA and credentials), where its CA checks them.",
        roles=(*SYNC, "label_nodes", "hooks:cluster_ready"),
    ),
    Option(
        "cargoship_api_context",
        "str",
        "Kubernetes API",
        "The context of that kubeconfig to use instead of its current one; else C(K8S_AUTH_CONTEXT).",
        roles=(*SYNC, "label_nodes", "hooks:cluster_ready"),
    ),
    Option(
        "cargoship_lock_stale_after",
        "int",
        "lock",
        "Seconds without a touch after which this run's lock may be taken over by another run (recorded in "
        "the lock, so that a taker judges it by the holder's window). At least twice "
        "O(cargoship_lock_touch_interval).",
        default=60,
        roles=("lock",),
        playbooks=("recover",),
    ),
    Option(
        "cargoship_lock_touch_interval",
        "int",
        "lock",
        "Seconds between two touches of this run's locks while it lives (the control host keeps them fresh "
        "however long a drain takes).",
        default=30,
        roles=("lock",),
        playbooks=("recover",),
    ),
    Option(
        "cargoship_unlock_force",
        "bool",
        "lock",
        "For the unlock playbook: release the locks on the hosts named whoever holds them, not only those of "
        "O(cargoship_run_id).",
        default=False,
        playbooks=("unlock",),
    ),
    Option(
        "cargoship_kubeconfig_update",
        "bool",
        "local kubeconfig",
        "Merge the cluster's admin credential into the local kubeconfig.",
        default_text="on when the kubeconfig phase is the one run alone",
        roles=("kubeconfig",),
    ),
    Option(
        "cargoship_kubeconfig_path",
        "path",
        "local kubeconfig",
        "The local kubeconfig file to update.",
        default="~/.kube/config",
        roles=("kubeconfig",),
    ),
    Option(
        "cargoship_cluster_name",
        "str",
        "local kubeconfig",
        "The name of the cluster, user and context entries written there.",
        default_text="the first controller's inventory name",
        roles=("kubeconfig",),
    ),
    Option(
        "cargoship_kubeconfig_keep",
        "bool",
        "local kubeconfig",
        "Keep the entries of that name already in the local kubeconfig instead of replacing them.",
        default=False,
        roles=("kubeconfig",),
    ),
    Option(
        "cargoship_label_nodes",
        "bool",
        "run",
        "Label every node with its profile (the label_nodes phase).",
        default_text="on when the label_nodes phase is the one run alone",
        roles=("label_nodes",),
    ),
    Option(
        "cargoship_hooks",
        "hooks",
        "run",
        "Hook point to a list of hooks (C(name), C(command) or C(tasks), C(run_on), C(become), C(may_fail)); "
        "see docs/hooks.md.",
        roles=("hooks",),
        playbooks=("engine_config_sync",),
    ),
    Option(
        "cargoship_phase",
        "phase",
        "run",
        "Run this phase alone (with the read-only phases it needs and the lock around it), as "
        "C(cargoship phase run) does.",
        default_text="every phase",
        playbooks=("engine_config_sync",),
    ),
    Option(
        "cargoship_run_id",
        "str",
        "run",
        "Names this run (locks, backups, the node marks); the recover and unlock playbooks take the interrupted run's.",
        default_text="generated from the start time",
        roles=("connect",),
        playbooks=("recover", "unlock"),
    ),
)
BY_NAME = {option.name: option for option in OPTIONS}


# engine_config's options that carry the desired state, and the variable each comes from: the desired state
# is spelled here once, for the sync phases' reads and for every write (engine_config's from_inventory).
DESIRED_STATE_ARGS = {**VARIABLES, "secret_paths": "cargoship_secret_paths"}


def desired_state_templates(with_charts: bool) -> dict:
    """engine_config's desired-state options as templates of the host's variables (a variable the host does
    not set is left out); the chart values only where the call manages the charts."""
    return {
        key: "{{ " + name + " | default(omit) }}"
        for key, name in DESIRED_STATE_ARGS.items()
        if with_charts or key != "chart_values"
    }


def from_inventory(args: dict) -> dict:
    """engine_config's arguments with ``from_inventory`` spread into the desired-state templates (the
    arguments given win), for the caller to template with the host's variables."""
    given = {key: value for key, value in args.items() if key != "from_inventory"}
    if not truthy(args.get("from_inventory")):
        return given
    return {**desired_state_templates(truthy(args.get("with_charts", False))), **given}


def default(name: str) -> object:
    """A variable's fixed default (KeyError for a name cargoship does not read, or one without a fixed
    default)."""
    value = BY_NAME[name].default
    if value is UNSET:
        raise KeyError(f"{name} has no fixed default")
    return value


def defaults() -> dict:
    """Every variable with a fixed default, and that default."""
    return {option.name: option.default for option in OPTIONS if option.default is not UNSET}


def value(variables, name: str) -> object:
    """A variable as a run sees it: the host's value, else the table's default."""
    found = variables.get(name)
    return default(name) if found is None else found


def argument_spec(option: Option) -> dict:
    """The option as a role's argument spec lists it."""
    spec: dict = {"description": option.description, "type": SPEC_TYPES[option.kind]}
    spec.update(option.spec)
    if option.required:
        spec["required"] = True
    if option.default is not UNSET:
        spec["default"] = option.default
    return spec


def for_role(role: str, entry_point: str) -> list[Option]:
    """The variables a phase role's entry point takes, in the table's order."""
    return [o for o in OPTIONS if role in o.roles or f"{role}:{entry_point}" in o.roles]


_MARKUP = re.compile(r"\b[CVOI]\(([^()]*(?:\([^()]*\)[^()]*)*)\)")


def as_markdown(text: str) -> str:
    """Ansible's documentation markup as Markdown code spans."""
    return _MARKUP.sub(lambda match: f"`{match.group(1)}`", text)


def markdown_table() -> str:
    """The settings table of docs/engine-config-sync.md."""
    rows = ["| variable | default | what it sets |", "|---|---|---|"]
    for group in GROUPS:
        rows.append(f"| **{group}** | | |")
        for option in (o for o in OPTIONS if o.group == group):
            if option.required:
                shown = "required"
            elif option.default is not UNSET:
                shown = (
                    f"`{option.default}`"
                    if not isinstance(option.default, bool)
                    else f"`{str(option.default).lower()}`"
                )
            else:
                shown = option.default_text or "unset"
            rows.append(f"| `{option.name}` | {shown} | {as_markdown(option.description).rstrip('.')} |")
    return "\n".join(rows)
