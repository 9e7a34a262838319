"""The test bed: real hosts on one machine.

Each host is a podman container with systemd as PID 1 and a real sshd (key-only login), in a network
namespace of its own, wired by a veth into a bridge that exists only for the lab. Hosts run the
engine stand-in (``engine/fake_engine.py``) as ``k3s``/``rke2`` under the real service names, and the
Kubernetes API test double (``kube_double.py``) runs on the control host.

    python tests/lab/labctl.py up --hosts 3 [--controllers 1] [--engine k3s|rke2] [--version V]
    python tests/lab/labctl.py down [--all]

``up`` clears whatever a crashed earlier run left, then writes ``.lab/inventory.yml`` and
``.lab/kubeconfig``. ``down`` removes every container, namespace, link and process the lab started.
Needs root (network namespaces) and the packages the Makefile's ``lab-deps`` target installs.

Several labs can run side by side, one per slot (``CARGOSHIP_LAB_SLOT``, 0 to 9; the test suite gives
each of its parallel workers one): a slot has its own names (``cslab`` for slot 0, ``cslab<N>``
otherwise), bridge, subnet (172.31.251.0/24 for slot 0, one lower per slot), API double and state
directory (``.lab``, ``.lab-<N>``), and ``up``/``down`` touch their own slot only; ``down --all`` clears
every slot. The host image and podman's store are shared (the image is built once, under a lock).
"""

from __future__ import annotations

import argparse
import datetime
import fcntl
import hashlib
import io
import ipaddress
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
CACHE = Path(os.environ.get("CARGOSHIP_LAB_CACHE", "/var/lib/cargoship-lab"))
RUNROOT = Path("/run/cargoship-lab")
SLOTS = range(10)


@dataclass(frozen=True)
class Slot:
    """What one lab has to itself, so that labs in different slots never meet."""

    number: int

    @property
    def prefix(self) -> str:
        return "cslab" if self.number == 0 else f"cslab{self.number}"

    @property
    def bridge(self) -> str:
        return f"{self.prefix}0"

    @property
    def subnet(self) -> ipaddress.IPv4Network:
        return ipaddress.ip_network(f"172.31.{251 - self.number}.0/24")

    @property
    def gateway(self) -> str:
        return str(self.subnet.network_address + 1)

    @property
    def label(self) -> str:
        """The podman label of this slot's containers (every lab container also has cargoship-lab=1)."""
        return f"cargoship-lab-slot={self.number}"

    @property
    def state(self) -> Path:
        default = REPO / (".lab" if self.number == 0 else f".lab-{self.number}")
        return Path(os.environ.get("CARGOSHIP_LAB_STATE", default)) if self == SLOT else default


def slot_from_environment() -> Slot:
    text = os.environ.get("CARGOSHIP_LAB_SLOT", "0").strip() or "0"
    if not text.isdigit() or int(text) not in SLOTS:
        raise SystemExit(f"labctl: CARGOSHIP_LAB_SLOT must be a number from 0 to 9, not {text!r}")
    return Slot(int(text))


SLOT = slot_from_environment()
STATE = SLOT.state
PREFIX = SLOT.prefix
BRIDGE = SLOT.bridge
SUBNET = SLOT.subnet
GATEWAY = SLOT.gateway
FIRST_HOST = 11
API_PORT = 6443
SSH_USER = "cargo"
SSH_UID = 1000

IMAGE_PACKAGES = [
    "openssh-server",
    "python3",
    "python3-yaml",
    "systemd",
    "systemd-sysv",
    "dbus",
    "iproute2",
    "procps",
    "sudo",
    "ca-certificates",
    "iptables",
    "nftables",
]
DEBIAN_SUITE = "bookworm"
DEBIAN_MIRROR = os.environ.get("CARGOSHIP_LAB_MIRROR", "http://deb.debian.org/debian")

ENGINE_SERVICES = {
    ("k3s", "server"): "k3s",
    ("k3s", "agent"): "k3s-agent",
    ("rke2", "server"): "rke2-server",
    ("rke2", "agent"): "rke2-agent",
}
DEFAULT_VERSIONS = {"k3s": "v1.30.2+k3s1", "rke2": "v1.30.2+rke2r1"}

# Image set-up that runs inside the debootstrapped tree. Part of the image cache key.
IMAGE_SETUP = f"""
set -e
: > /etc/machine-id
rm -f /etc/ssh/ssh_host_*
useradd --create-home --shell /bin/bash --uid {SSH_UID} {SSH_USER}
echo '{SSH_USER} ALL=(ALL) NOPASSWD:ALL' > /etc/sudoers.d/{SSH_USER}
chmod 0440 /etc/sudoers.d/{SSH_USER}
cat > /etc/ssh/sshd_config.d/lab.conf <<'EOF'
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin no
UseDNS no
HostKey /etc/ssh/ssh_host_ed25519_key
EOF
# One ed25519 host key (the only type the lab's known_hosts takes, ssh-keyscan -t ed25519): `ssh-keygen -A`
# also made an RSA key, about 0.5 s of CPU per host at every boot, a third of a lab's whole set-up.
cat > /etc/systemd/system/lab-ssh-hostkeys.service <<'EOF'
[Unit]
Description=Generate the SSH host key at first boot
Before=ssh.service
ConditionPathExists=!/etc/ssh/ssh_host_ed25519_key
[Service]
Type=oneshot
ExecStart=/usr/bin/ssh-keygen -q -t ed25519 -N "" -f /etc/ssh/ssh_host_ed25519_key
[Install]
WantedBy=multi-user.target
EOF
systemctl enable lab-ssh-hostkeys.service ssh.service
systemctl mask getty@tty1.service console-getty.service systemd-logind.service apt-daily.timer \
    apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer systemd-tmpfiles-clean.timer
apt-get clean
rm -rf /var/lib/apt/lists/* /usr/share/doc/* /usr/share/man/* /usr/share/locale/*
"""


class LabError(RuntimeError):
    """The lab could not be brought up or down; the message says what failed."""


@dataclass
class Host:
    name: str
    address: str
    role: str  # "server" or "agent"

    @property
    def container(self) -> str:
        return f"{PREFIX}-{self.name}"

    @property
    def netns(self) -> str:
        return f"{PREFIX}-{self.name}"

    @property
    def veth(self) -> str:
        return f"{PREFIX}v-{self.name}"[:15]


@dataclass
class Lab:
    hosts: list[Host]
    engine: str = "k3s"
    version: str = ""
    state: Path = STATE
    token: str = field(default_factory=lambda: secrets.token_hex(16))
    # The kubelets' own credential: a real kubelet authenticates as system:node:<name> (group system:nodes) with
    # a client certificate of its own, not with the operator's (Kubernetes docs, "Using Node Authorization"), so
    # that RBAC, and a fault a test aims at the operator, tells them apart.
    node_token: str = field(default_factory=lambda: secrets.token_hex(16))

    @classmethod
    def plan(cls, hosts: int, controllers: int = 1, engine: str = "k3s", version: str = "") -> Lab:
        if engine not in ("k3s", "rke2"):
            raise LabError(f"ENGINE must be k3s or rke2, not {engine!r}")
        if not 1 <= controllers <= hosts <= 200:
            raise LabError(f"need 1 <= CONTROLLERS ({controllers}) <= HOSTS ({hosts}) <= 200")
        members = []
        for index in range(hosts):
            is_controller = index < controllers
            name = f"c{index + 1}" if is_controller else f"w{index - controllers + 1}"
            address = str(SUBNET.network_address + FIRST_HOST + index)
            members.append(Host(name, address, "server" if is_controller else "agent"))
        return cls(members, engine, version or DEFAULT_VERSIONS[engine])

    @property
    def controllers(self) -> list[Host]:
        return [h for h in self.hosts if h.role == "server"]

    @property
    def api_url(self) -> str:
        return f"https://{GATEWAY}:{API_PORT}"


def run(cmd: list[str], check: bool = True, **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run(cmd, capture_output=True, text=True, **kwargs, check=False)
    if check and result.returncode != 0:
        raise LabError(
            f"{' '.join(cmd)} failed ({result.returncode}): {result.stderr.strip() or result.stdout.strip()}"
        )
    return result


def podman_env() -> dict[str, str]:
    """Podman settings this kernel needs (see shared/notes/test-lab.md), in a store of the lab's own."""
    conf_dir = CACHE / "conf"
    conf_dir.mkdir(parents=True, exist_ok=True)
    containers_conf = conf_dir / "containers.conf"
    write_if_changed(
        containers_conf,
        '[containers]\ndefault_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]\n'
        '[engine]\nruntime = "runc"\ncgroup_manager = "cgroupfs"\nevents_logger = "file"\n'
        f'events_logfile_path = "{RUNROOT}/events.log"\n',
    )
    storage_conf = conf_dir / "storage.conf"
    write_if_changed(
        storage_conf,
        f'[storage]\ndriver = "overlay"\ngraphroot = "{CACHE}/storage"\nrunroot = "{RUNROOT}/storage"\n',
    )
    return {**os.environ, "CONTAINERS_CONF": str(containers_conf), "CONTAINERS_STORAGE_CONF": str(storage_conf)}


def write_if_changed(path: Path, text: str) -> None:
    """Replace the file whole (a rename) when its text differs: labs in other slots read it meanwhile."""
    try:
        if path.read_text() == text:
            return
    except OSError:
        pass
    scratch = path.with_name(f".{path.name}.{os.getpid()}")
    scratch.write_text(text)
    scratch.replace(path)


# Where podman's cgroupfs manager keeps each container's CPU accounting (cgroup v1), as on this machine.
CPUACCT = Path("/sys/fs/cgroup/cpuacct/libpod_parent")


def containers_cpu(ids: list[str]) -> float:
    """Seconds of CPU the containers (full IDs) used so far: sshd, sudo, modules, engine stand-ins."""
    return sum(int((CPUACCT / f"libpod-{cid}" / "cpuacct.usage").read_text()) for cid in ids) / 1e9


def podman(*args: str, check: bool = True, input_bytes: bytes | None = None) -> subprocess.CompletedProcess:
    cmd = ["podman", *args]
    if input_bytes is not None:
        for attempt in range(3):
            result = subprocess.run(cmd, input=input_bytes, capture_output=True, env=podman_env(), check=False)
            # `podman cp -` into a created container hands the archive to a copier it starts; while other
            # slots build labs on the same store, that copier has been seen to end before reading it all
            # ("passing bulk input to subprocess: write |1: broken pipe"; twice in a day's suites, each time
            # with three labs building). Copying the whole archive again overwrites whatever part was copied.
            if result.returncode == 0 or b"broken pipe" not in result.stderr or attempt == 2:
                break
            time.sleep(1 + attempt)
        if check and result.returncode != 0:
            raise LabError(f"{' '.join(cmd)} failed: {result.stderr.decode(errors='replace').strip()}")
        return result
    return run(cmd, check=check, env=podman_env())


# -- image --------------------------------------------------------------------------------------------


# The lab's clock-skew library (clock_skew.c: what a host whose wall clock is off shows its processes), built on
# this machine at the image's build and preloaded by every process of every host from its boot (/etc/ld.so.preload),
# so that a skew set later (RunningLab.skew_clock) reaches the running engine and kubelet at once, as a real clock
# step does. Without the skew file it moves nothing.
CLOCK_SKEW_SOURCE = HERE / "clock_skew.c"
CLOCK_SKEW_LIBRARY = "/usr/local/lib/cargoship-lab/clock_skew.so"
CLOCK_SKEW_FILE = "/etc/cargoship-lab/clock-skew"  # the seconds the library moves the clock by (its SKEW_FILE)
PRELOAD = "/etc/ld.so.preload"  # the dynamic loader's list of libraries every process loads (ld.so(8))


def image_name() -> str:
    built_from = DEBIAN_SUITE + " ".join(IMAGE_PACKAGES) + IMAGE_SETUP + CLOCK_SKEW_SOURCE.read_text() + PRELOAD
    digest = hashlib.sha256(built_from.encode()).hexdigest()[:12]
    return f"localhost/cargoship-lab-host:{digest}"


def ensure_image(log=print) -> str:
    """Build the host image with debootstrap once; later runs reuse it from the lab's store."""
    image = image_name()
    if podman("image", "exists", image, check=False).returncode == 0:
        return image
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / "image.lock", "w", encoding="utf-8") as lock:
        # Labs in other slots may want it at the same moment: one builds, the others wait and reuse it.
        fcntl.flock(lock, fcntl.LOCK_EX)
        if podman("image", "exists", image, check=False).returncode == 0:
            return image
        build_image(image, log)
    return image


def build_image(image: str, log=print) -> None:
    log(f"building host image {image} (debootstrap {DEBIAN_SUITE}, about a minute)")
    with tempfile.TemporaryDirectory(dir=CACHE) as scratch:
        rootfs = Path(scratch) / "rootfs"
        run(
            [
                "debootstrap",
                "--variant=minbase",
                f"--include={','.join(IMAGE_PACKAGES)}",
                DEBIAN_SUITE,
                str(rootfs),
                DEBIAN_MIRROR,
            ],
            timeout=900,
        )
        run(["chroot", str(rootfs), "/bin/sh", "-c", IMAGE_SETUP])
        install_clock_skew(rootfs)
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        imported = subprocess.run(
            ["podman", "import", "--change", 'CMD=["/sbin/init"]', "-", image],
            stdin=tar.stdout,
            capture_output=True,
            text=True,
            env=podman_env(),
            check=False,
        )
        tar.wait()
        if imported.returncode != 0 or tar.returncode != 0:
            raise LabError(f"podman import failed: {imported.stderr.strip()}")


def install_clock_skew(rootfs: Path) -> None:
    """The clock-skew library into the image, preloaded by every process from the host's boot."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise LabError(
            "no C compiler (cc) on this machine: the lab's clock-skew library needs one (make deps installs gcc)"
        )
    library = rootfs / CLOCK_SKEW_LIBRARY.lstrip("/")
    library.parent.mkdir(parents=True, exist_ok=True)
    run([compiler, "-O2", "-Wall", "-Werror", "-shared", "-fPIC", "-o", str(library), str(CLOCK_SKEW_SOURCE), "-ldl"])
    # Built with this machine's C library for the image's: one that does not load there would print an error in
    # every process of a skewed host.
    loaded = run(["chroot", str(rootfs), "/usr/bin/env", f"LD_PRELOAD={CLOCK_SKEW_LIBRARY}", "/bin/true"], check=False)
    if loaded.returncode != 0 or loaded.stderr.strip():
        raise LabError(f"the clock-skew library does not load in the image: {loaded.stderr.strip()}")
    (rootfs / PRELOAD.lstrip("/")).write_text(CLOCK_SKEW_LIBRARY + "\n")


# -- certificates -------------------------------------------------------------------------------------


def make_certificates(lab: Lab) -> None:
    """A CA and a serving certificate valid for the API double and every server's :6443 relay."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "cargoship-lab-ca")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=7))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        # The extensions a CA of kubeadm, k3s or RKE2 carries; Python 3.13 verifies strictly (X.509
        # strict mode) and refuses a chain without them ("Missing Authority Key Identifier").
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    addresses = [GATEWAY, "127.0.0.1", *(h.address for h in lab.hosts)]
    names = [x509.DNSName(n) for n in ("localhost", "kubernetes", "kubernetes.default", *(h.name for h in lab.hosts))]
    names += [x509.IPAddress(ipaddress.ip_address(a)) for a in addresses]
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=7))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    (lab.state / "ca.crt").write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    (lab.state / "apiserver.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    write_private(
        lab.state / "apiserver.key",
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()),
    )
    write_private(lab.state / "api-token", lab.token.encode())
    write_private(lab.state / "node-token", lab.node_token.encode())


def write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def kubeconfig(lab: Lab, server: str) -> dict:
    import base64

    ca = base64.b64encode((lab.state / "ca.crt").read_bytes()).decode()
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "clusters": [{"name": "default", "cluster": {"server": server, "certificate-authority-data": ca}}],
        "users": [{"name": "default", "user": {"token": lab.token}}],
        "contexts": [{"name": "default", "context": {"cluster": "default", "user": "default"}}],
        "current-context": "default",
    }


# -- network ------------------------------------------------------------------------------------------


def network_up(lab: Lab) -> None:
    run(["ip", "link", "add", BRIDGE, "type", "bridge"])
    run(["ip", "addr", "add", f"{GATEWAY}/{SUBNET.prefixlen}", "dev", BRIDGE])
    run(["ip", "link", "set", BRIDGE, "up"])
    for host in lab.hosts:
        run(["ip", "netns", "add", host.netns])
        run(["ip", "link", "add", host.veth, "type", "veth", "peer", "name", "eth0", "netns", host.netns])
        run(["ip", "link", "set", host.veth, "master", BRIDGE, "up"])
        inside = ["ip", "netns", "exec", host.netns]
        run([*inside, "ip", "addr", "add", f"{host.address}/{SUBNET.prefixlen}", "dev", "eth0"])
        run([*inside, "ip", "link", "set", "eth0", "up"])
        run([*inside, "ip", "link", "set", "lo", "up"])
        run([*inside, "ip", "route", "add", "default", "via", GATEWAY])


# -- hosts --------------------------------------------------------------------------------------------


def host_files(lab: Lab, host: Host, public_key: str) -> bytes:
    """Everything a host gets on top of the image, as a tar stream for ``podman cp``."""
    flavor, role = lab.engine, host.role
    service = ENGINE_SERVICES[(flavor, role)]
    binary = f"/usr/local/bin/{flavor}"
    engine_src = (HERE / "engine" / "fake_engine.py").read_text()
    unit = (HERE / "engine" / "engine.service.in").read_text()
    killall = (HERE / "engine" / "killall.sh.in").read_text()
    for placeholder, value in (("@SERVICE@", service), ("@FLAVOR@", flavor), ("@ROLE@", role), ("@BINARY@", binary)):
        unit, killall = unit.replace(placeholder, value), killall.replace(placeholder, value)
    first_server = lab.controllers[0]
    config: dict = {"node-name": host.name, "node-ip": host.address, "token": lab.token[:12]}
    if role == "server":
        config["write-kubeconfig-mode"] = "0600"
        config["tls-san"] = [host.address]
        # Servers with embedded etcd, as a real HA cluster is set up (real-engines.md, "The API server and
        # etcd"): k3s's first server starts the etcd cluster (cluster-init), the others join it; RKE2
        # always runs etcd on its servers and joins them through the first one's supervisor port.
        if host is first_server and flavor == "k3s":
            config["cluster-init"] = True
        elif host is not first_server:
            config["server"] = f"https://{first_server.address}:{9345 if flavor == 'rke2' else API_PORT}"
    else:
        port = 9345 if flavor == "rke2" else API_PORT
        config["server"] = f"https://{first_server.address}:{port}"
    files: list[tuple[str, bytes, int, int]] = [
        (f"/home/{SSH_USER}/.ssh/authorized_keys", public_key.encode(), 0o600, SSH_UID),
        (binary, engine_src.encode(), 0o755, 0),
        (f"/usr/local/bin/{flavor}-killall.sh", killall.encode(), 0o755, 0),
        (f"/etc/systemd/system/{service}.service", unit.encode(), 0o644, 0),
        (f"/etc/rancher/{flavor}/config.yaml", yaml.safe_dump(config).encode(), 0o600, 0),
        ("/etc/cargoship-lab/engine-version", (lab.version + "\n").encode(), 0o644, 0),
        (
            "/etc/cargoship-lab/node.json",
            json.dumps({"name": host.name, "ip": host.address, "arch": "amd64"}).encode(),
            0o644,
            0,
        ),
        ("/etc/cargoship-lab/api.json", json.dumps({"url": lab.api_url, "token": lab.node_token}).encode(), 0o600, 0),
        ("/etc/cargoship-lab/ca.crt", (lab.state / "ca.crt").read_bytes(), 0o644, 0),
    ]
    if role == "server":
        admin = yaml.safe_dump(kubeconfig(lab, f"https://127.0.0.1:{API_PORT}")).encode()
        files.append(("/etc/cargoship-lab/admin-kubeconfig.yaml", admin, 0o600, 0))
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        directories = (
            {f"/home/{SSH_USER}/.ssh": (0o700, SSH_UID), f"/var/lib/rancher/{flavor}/server/manifests": (0o700, 0)}
            if role == "server"
            else {f"/home/{SSH_USER}/.ssh": (0o700, SSH_UID)}
        )
        for path, (mode, uid) in directories.items():
            info = tarfile.TarInfo(path.lstrip("/"))
            info.type, info.mode, info.uid, info.gid, info.mtime = tarfile.DIRTYPE, mode, uid, uid, int(time.time())
            tar.addfile(info)
        for path, data, mode, uid in files:
            info = tarfile.TarInfo(path.lstrip("/"))
            info.size, info.mode, info.uid, info.gid, info.mtime = len(data), mode, uid, uid, int(time.time())
            tar.addfile(info, io.BytesIO(data))
        wants = tarfile.TarInfo(f"etc/systemd/system/multi-user.target.wants/{service}.service")
        wants.type, wants.linkname = tarfile.SYMTYPE, f"/etc/systemd/system/{service}.service"
        tar.addfile(wants)
    return buffer.getvalue()


# Each host's systemd takes several inotify instances; the kernel's default of 128 per user runs out
# at about 25 hosts and the rest never boot far enough to start sshd.
INOTIFY_LIMITS = {"fs/inotify/max_user_instances": 8192, "fs/inotify/max_user_watches": 524288}


def raise_inotify_limits(log=print) -> None:
    """Raise (never lower) the machine's inotify limits; a machine-wide setting that stays until reboot."""
    for key, wanted in INOTIFY_LIMITS.items():
        path = Path("/proc/sys") / key
        current = int(path.read_text())
        if current < wanted:
            path.write_text(str(wanted))
            log(f"raised {key.replace('/', '.')} from {current} to {wanted} for the lab's systemd hosts")


def start_hosts(lab: Lab, image: str, public_key: str) -> None:
    add_hosts = [f"--add-host={h.name}:{h.address}" for h in lab.hosts]
    for host in lab.hosts:
        podman(
            "create",
            "--name",
            host.container,
            "--hostname",
            host.name,
            "--network",
            f"ns:/run/netns/{host.netns}",
            "--systemd=always",
            "--dns",
            "127.0.0.1",
            *add_hosts,
            "--cap-add",
            "NET_ADMIN,NET_RAW,AUDIT_WRITE",
            "--label",
            "cargoship-lab=1",
            "--label",
            SLOT.label,
            image,
        )
        podman("cp", "--archive=false", "-", f"{host.container}:/", input_bytes=host_files(lab, host, public_key))
        podman("start", host.container)


def wait_for_ssh(lab: Lab, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    pending = {h.address: h for h in lab.hosts}
    lines: list[str] = []
    while pending:
        if time.monotonic() > deadline:
            raise LabError(f"hosts without sshd after {timeout}s: {', '.join(h.name for h in pending.values())}")
        result = run(["ssh-keyscan", "-T", "2", "-t", "ed25519", *pending], check=False)
        for line in result.stdout.splitlines():
            address = line.split()[0]
            if address in pending:
                host = pending.pop(address)
                key = line.split(None, 1)[1]
                lines += [f"{host.address} {key}", f"{host.name} {key}"]
        if pending:
            time.sleep(0.5)
    (lab.state / "known_hosts").write_text("\n".join(lines) + "\n")


def write_inventory(lab: Lab) -> None:
    ssh_args = f"-o UserKnownHostsFile={lab.state / 'known_hosts'} -o StrictHostKeyChecking=yes -o IdentitiesOnly=yes"
    inventory = {
        "all": {
            "vars": {
                "ansible_user": SSH_USER,
                "ansible_ssh_private_key_file": str(lab.state / "id_ed25519"),
                "ansible_ssh_common_args": ssh_args,
                "ansible_python_interpreter": "/usr/bin/python3",
                "cargoship_engine": lab.engine,
                # As an operator's kubeconfig points at one server (real-engines.md, "The API server and
                # etcd"): cargoship reaches the API through the first server's :6443, which is down while
                # that server restarts. The tests' own look at the API goes to the double directly
                # (lab.state / "kubeconfig"), whatever the servers do.
                "cargoship_api_kubeconfig": str(lab.state / "server-kubeconfig"),
                # Shorter than the default 10 s only to keep the suite short (1 s: each restart of the suite
                # waits it out): the settle catches an engine that dies after signalling READY, and the
                # stand-in never does (its failures come before READY, where the unit never turns active,
                # whatever the settle time).
                "cargoship_engine_settle": 1,
            },
            "children": {
                "controllers": {
                    "hosts": {h.name: {"ansible_host": h.address} for h in lab.hosts if h.role == "server"}
                },
                "workers": {"hosts": {h.name: {"ansible_host": h.address} for h in lab.hosts if h.role == "agent"}},
            },
        }
    }
    if len(lab.controllers) == 2:
        # Two etcd members lose their quorum while either restarts (etcd needs a majority): cargoship refuses
        # that unless told. The lab's two-server shapes accept it, as a user of such a cluster must; the API
        # double stays up meanwhile, where a real API would be read-only until the member is back.
        inventory["all"]["vars"]["cargoship_allow_etcd_quorum_loss"] = True
    (lab.state / "inventory.yml").write_text(yaml.safe_dump(inventory, sort_keys=False))
    write_private(lab.state / "kubeconfig", yaml.safe_dump(kubeconfig(lab, lab.api_url)).encode())
    first_server = f"https://{lab.controllers[0].address}:{API_PORT}"
    write_private(lab.state / "server-kubeconfig", yaml.safe_dump(kubeconfig(lab, first_server)).encode())
    (lab.state / "lab.json").write_text(
        json.dumps(
            {
                "engine": lab.engine,
                "version": lab.version,
                "hosts": [{"name": h.name, "address": h.address, "role": h.role} for h in lab.hosts],
            },
            indent=2,
        )
    )


def start_api_double(lab: Lab) -> None:
    log = open(lab.state / "kube-double.log", "ab")
    process = subprocess.Popen(
        [
            sys.executable,
            str(HERE / "kube_double.py"),
            "--listen",
            f"{GATEWAY}:{API_PORT}",
            "--cert",
            str(lab.state / "apiserver.crt"),
            "--key",
            str(lab.state / "apiserver.key"),
            "--token-file",
            str(lab.state / "api-token"),
            "--node-token-file",
            str(lab.state / "node-token"),
        ],
        stdout=log,
        stderr=log,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    (lab.state / "kube-double.pid").write_text(str(process.pid))
    import ssl

    context = ssl.create_default_context(cafile=str(lab.state / "ca.crt"))
    deadline = time.monotonic() + 15
    while True:
        try:
            with urllib.request.urlopen(f"{lab.api_url}/healthz", context=context, timeout=2):
                return
        except OSError as exc:
            if process.poll() is not None or time.monotonic() > deadline:
                raise LabError(
                    f"Kubernetes API double did not start: {exc}; see {lab.state / 'kube-double.log'}"
                ) from exc
            time.sleep(0.2)


def seed_workloads(lab: Lab) -> None:
    """A DaemonSet and a replicated app with emptyDir data, so that nodes carry the kinds of pods a drain
    meets (RKE2 nodes add their own mirror pods, made by the stand-in kubelet)."""
    from kubernetes import client, config

    api_client = config.new_client_from_config(str(lab.state / "kubeconfig"))
    apps = client.AppsV1Api(api_client)
    apps.create_namespaced_daemon_set(
        "kube-system",
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": "node-agent"},
            "spec": {
                "selector": {"matchLabels": {"app": "node-agent"}},
                "template": {
                    "metadata": {"labels": {"app": "node-agent"}},
                    "spec": {"containers": [{"name": "agent", "image": "busybox"}]},
                },
            },
        },
    )
    apps.create_namespaced_replica_set(
        "default",
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": "web"},
            "spec": {
                "replicas": len(lab.hosts),
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {
                        "containers": [{"name": "web", "image": "nginx"}],
                        # A cache on emptyDir, as many real apps have: a drain deletes it, and says so.
                        "volumes": [{"name": "cache", "emptyDir": {}}],
                        # Evicted pods terminate over this period (the API double honours it as the API
                        # server does); short, so that a drain in a test takes a second, not 30 s a pod.
                        "terminationGracePeriodSeconds": 1,
                    },
                },
            },
        },
    )


def wait_for_nodes(lab: Lab, timeout: float = 60) -> None:
    from kubernetes import client, config

    core = client.CoreV1Api(config.new_client_from_config(str(lab.state / "kubeconfig")))
    deadline = time.monotonic() + timeout
    wanted = {h.name for h in lab.hosts}
    while True:
        ready = {
            n.metadata.name
            for n in core.list_node().items
            if any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])
        }
        if wanted <= ready:
            return
        if time.monotonic() > deadline:
            raise LabError(f"nodes not Ready after {timeout}s: {', '.join(sorted(wanted - ready))}")
        time.sleep(0.5)


# -- life cycle ---------------------------------------------------------------------------------------


def up(hosts: int = 3, controllers: int = 1, engine: str = "k3s", version: str = "", log=print) -> Lab:
    lab = Lab.plan(hosts, controllers, engine, version)
    down(log=lambda _msg: None)
    started = time.monotonic()
    RUNROOT.mkdir(parents=True, exist_ok=True)
    image = ensure_image(log)
    lab.state.mkdir(parents=True, exist_ok=True)
    try:
        key = lab.state / "id_ed25519"
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "cargoship-lab", "-f", str(key)])
        make_certificates(lab)
        raise_inotify_limits(log)
        network_up(lab)
        start_api_double(lab)
        start_hosts(lab, image, (lab.state / "id_ed25519.pub").read_text())
        wait_for_ssh(lab)
        write_inventory(lab)
        wait_for_nodes(lab)
        seed_workloads(lab)
    except BaseException:
        down(log=lambda _msg: None)
        raise
    log(
        f"lab up: {len(lab.hosts)} {engine} hosts ({len(lab.controllers)} controllers) in "
        f"{time.monotonic() - started:.1f}s; inventory {lab.state / 'inventory.yml'}"
    )
    return lab


def down(log=print, slot: Slot | None = None) -> None:
    """Remove every trace of this slot's lab (``slot``: another's), also one a crashed run left half
    built. Safe to run twice."""
    slot = slot or SLOT
    # SSH connections into the lab (ansible's ControlPersist masters among them) go first.
    for pid in ssh_clients_of_lab(slot):
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    if shutil.which("podman"):
        names = containers_of(slot)
        if names:
            podman("rm", "-f", "-t", "0", *names, check=False)
    pid_file = slot.state / "kube-double.pid"
    if pid_file.exists():
        try:
            os.killpg(int(pid_file.read_text()), signal.SIGTERM)
        except (ProcessLookupError, ValueError):
            pass
        pid_file.unlink()
    # Also an API double whose pid file a crashed run never wrote or already lost.
    run(["pkill", "-f", double_pattern(slot)], check=False)
    for name in namespaces_of(slot):
        for pid in run(["ip", "netns", "pids", name], check=False).stdout.split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
        run(["ip", "netns", "del", name], check=False)
    for name in links_of(slot):
        run(["ip", "link", "del", name], check=False)
    for leftover in (
        "inventory.yml",
        "kubeconfig",
        "server-kubeconfig",
        "lab.json",
        "known_hosts",
        "id_ed25519",
        "id_ed25519.pub",
        "api-token",
        "node-token",
        "apiserver.key",
        "apiserver.crt",
        "ca.crt",
    ):
        (slot.state / leftover).unlink(missing_ok=True)
    deadline = time.monotonic() + 10
    while (left := traces(slot)) and time.monotonic() < deadline:
        time.sleep(0.2)
    if left:
        raise LabError("lab down left: " + "; ".join(left))
    which = "" if slot.number == 0 else f" (slot {slot.number})"
    log(f"lab down{which}: no lab containers, namespaces, links or processes left")


def down_all(log=print) -> None:
    """Every slot's lab down (``make lab-down``)."""
    for number in SLOTS:
        slot = Slot(number)
        if number == SLOT.number or traces(slot):
            down(log=log, slot=slot)


def double_pattern(slot: Slot) -> str:
    return f"kube_double.py --listen {slot.gateway}:"


def containers_of(slot: Slot) -> list[str]:
    """The slot's containers, by their names (also those of a lab from before slots had labels)."""
    names = podman("ps", "-a", "--filter", "label=cargoship-lab=1", "--format", "{{.Names}}", check=False).stdout
    return [name for name in names.split() if name.startswith(f"{slot.prefix}-")]


def namespaces_of(slot: Slot) -> list[str]:
    listed = run(["ip", "netns", "list"], check=False).stdout.splitlines()
    return [line.split()[0] for line in listed if line.strip() and line.split()[0].startswith(f"{slot.prefix}-")]


def links_of(slot: Slot) -> list[str]:
    found = []
    for line in run(["ip", "-o", "link", "show"], check=False).stdout.splitlines():
        name = line.split(":")[1].strip().split("@")[0]
        if name.startswith(f"{slot.prefix}v-") or name == slot.bridge:
            found.append(name)
    return found


def ssh_clients_of_lab(slot: Slot | None = None) -> set[int]:
    """PIDs of processes holding TCP connections into the slot's subnet (ssh masters, mostly)."""
    out = run(["ss", "-Htnp", "dst", str((slot or SLOT).subnet)], check=False).stdout
    return {int(pid) for pid in re.findall(r"pid=(\d+)", out) if int(pid) != os.getpid()}


def traces(slot: Slot | None = None) -> list[str]:
    """Everything of this slot's lab still present on this machine, described; empty when clean."""
    slot = slot or SLOT
    found = []
    if shutil.which("podman"):
        found += [f"container {n}" for n in containers_of(slot)]
    found += [f"network namespace {name}" for name in namespaces_of(slot)]
    found += [f"link {name}" for name in links_of(slot)]
    double = run(["pgrep", "-f", double_pattern(slot)], check=False).stdout.split()
    found += [f"API double process {pid}" for pid in double]
    found += [f"process {pid} connected into {slot.subnet}" for pid in sorted(ssh_clients_of_lab(slot))]
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description="cargoship test bed")
    sub = parser.add_subparsers(dest="command", required=True)
    up_cmd = sub.add_parser("up", help="start N hosts")
    up_cmd.add_argument("--hosts", type=int, default=3)
    up_cmd.add_argument("--controllers", type=int, default=1)
    up_cmd.add_argument("--engine", default="k3s")
    up_cmd.add_argument("--version", default="")
    down_cmd = sub.add_parser("down", help="remove every trace of the lab")
    down_cmd.add_argument("--all", action="store_true", help="the labs of every slot, not only this one")
    sub.add_parser("image", help="build the host image (cached)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("labctl: the lab needs root (network namespaces, podman as root)", file=sys.stderr)
        return 2
    try:
        if args.command == "up":
            up(args.hosts, args.controllers, args.engine, args.version)
        elif args.command == "image":
            RUNROOT.mkdir(parents=True, exist_ok=True)
            print(ensure_image())
        elif args.all:
            down_all()
        else:
            down()
    except LabError as exc:
        print(f"labctl: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
