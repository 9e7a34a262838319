"""Drive a cargoship playbook with ansible-runner and turn its outcome into a report and an exit code."""

from __future__ import annotations

import configparser
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import ansible_runner

from cargoship_runner import leftovers
from cargoship_runner.collection import collections_path, lock_keeper, run_collections_path

# Keepalives, so that a cut connection fails its node in about 45 s instead of after minutes of TCP
# retries. They are appended to the user's ssh_args: ssh takes the first value of an option, so a
# ServerAlive setting of the user's wins, and the rest of their ssh_args (jump hosts...) stays.
SSH_KEEPALIVE = "-o ServerAliveInterval=15 -o ServerAliveCountMax=3"
# Where the user set no ssh_args: Ansible's default without -C. What a run sends is mostly module payloads,
# zip archives already (a quarter smaller under ssh's zlib, for about 20 ms of CPU per module run on each
# end: two thirds of the SSH clients' CPU in a run; docs/performance.md).
DEFAULT_SSH_ARGS = "-o ControlMaster=auto -o ControlPersist=60s"
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# ansible-playbook's prompts for -K and --ask-vault-pass, as ansible-runner matches them.
PROMPTS = {"become": r"^BECOME password.*:\s*?$", "vault": r"^Vault password.*:\s*?$"}
# A Unix socket's path holds at most 107 bytes. Ansible names a master connection's socket
# <control_path_dir>/<10 hex digits>, and ssh first creates it as that path with a dot and 16 random
# characters appended.
SOCKET_PATH_MAX = 107
CONTROL_SOCKET_NAME = len("/0123456789.0123456789abcdef")
CONTROL_DIR_PREFIX = leftovers.SSH_PREFIX
# Ansible's own default (5) makes a fleet of hundreds wait in line; used when nothing else is set.
DEFAULT_FORKS = 25


@dataclass(kw_only=True)
class RunOptions:
    playbook: str
    # One inventory source or several (-i repeated), as ansible-playbook takes them.
    inventory: Path | tuple[Path, ...]
    dry_run: bool = False
    limit: str | None = None
    forks: int | None = None
    extravars: dict = field(default_factory=dict)
    vault_password_file: Path | None = None
    verbosity: int = 0
    keep_artifacts: bool = False
    # The user's own extra variables (-e), which every playbook of the run gets, the recovery and the
    # lock release included; the command's own variables win over them.
    user_vars: dict = field(default_factory=dict)
    # -e @FILE: given to ansible-playbook by path, so that its content (vaulted or not) is read by Ansible
    # alone and never copied into the run's directory.
    user_var_files: tuple = ()
    vault_ids: tuple = ()  # --vault-id values, passed on as they are
    # -K / --ask-vault-pass: the answers to ansible-playbook's own prompts ("become", "vault"), kept in memory.
    passwords: dict = field(default_factory=dict, repr=False)

    @property
    def inventories(self) -> tuple[Path, ...]:
        return tuple(self.inventory) if isinstance(self.inventory, (tuple, list)) else (self.inventory,)

    def inventory_args(self) -> str:
        """The inventory as an ansible-playbook command line names it, for the commands we print."""
        return " ".join(f"-i {shlex.quote(str(path))}" for path in self.inventories)


@dataclass(kw_only=True)
class RunOutcome:
    rc: int
    report: dict | None
    unreachable: list[str]
    run_id: str
    interrupted: bool
    # Ansible's own error lines (message and origin, never the quoted source), for a run that ended
    # before the report callback could say what happened.
    ansible_errors: list[str] = field(default_factory=list)
    artifacts: Path | None = None  # the run's directory, when kept
    keeper_stop: str | None = None  # why the lock keeper stopped the run, if it did
    log: Path | None = None  # Ansible's own output of a run that failed, kept (source excerpts withheld)
    # Why the command's own handling of Ansible's events failed, if it did: the run was then stopped.
    handler_error: str | None = None

    @property
    def stopped_early(self) -> bool:
        """Stopped from this side (Ctrl-C, a signal, or the command's event handling failing)."""
        return self.interrupted or self.handler_error is not None


class GuardedHandler:
    """The command's event handler, as ansible-runner calls it from its own thread. An exception there
    would end that thread silently and leave the command waiting for ever; here the first one is kept,
    the run is stopped (``failed`` tells ansible-runner's cancel check) and later events are still fed to
    the handler, so that the nodes in flight stay known for the put-back.

    What it returns tells ansible-runner whether to write the event into the run's directory: every event
    when the directory is kept (``keep_events``, --keep-artifacts), else only the closing stats, from which
    ansible-runner reads the unreachable hosts. The others would go to a directory removed when the run ends,
    and ansible-runner would read every one of them back for the stats: some 300 files in a small run."""

    KEPT_ALWAYS = frozenset({"playbook_on_stats"})

    def __init__(self, handler, started=None, keep_events: bool = True) -> None:
        self.handler = handler
        self.keep_events = keep_events
        self.error: str | None = None
        # Called once, at the first play's start: ansible-playbook has read its extra vars by then.
        self.started = started

    @property
    def failed(self) -> bool:
        return self.error is not None

    def __call__(self, event: dict) -> bool:
        if self.started is not None and event.get("event") == "playbook_on_play_start":
            started, self.started = self.started, None
            started()
        keep = self.keep_events or event.get("event") in self.KEPT_ALWAYS
        if self.handler is None:
            return keep
        try:
            self.handler(event)
        except Exception as exc:
            if self.error is None:
                self.error = f"{type(exc).__name__}: {exc}"
        return keep


def playbook_path(name: str) -> Path:
    return collections_path() / "ansible_collections" / "cargoship" / "engine" / "playbooks" / f"{name}.yml"


def ansible_cfg() -> Path | None:
    """The ansible.cfg that ansible-playbook started here would read (ansible-runner runs it elsewhere)."""
    candidates = [os.environ.get("ANSIBLE_CONFIG"), "ansible.cfg", "~/.ansible.cfg", "/etc/ansible/ansible.cfg"]
    for candidate in filter(None, candidates):
        path = Path(candidate).expanduser()
        path = path / "ansible.cfg" if path.is_dir() else path
        if path.is_file():
            return path.resolve()
    return None


def cfg_value(config: Path | None, section: str, key: str) -> str | None:
    if config is None:
        return None
    parser = configparser.ConfigParser(interpolation=None, inline_comment_prefixes=(";",))
    try:
        parser.read(config)
        return parser.get(section, key, fallback=None)
    except configparser.Error:
        return None


def unless_chosen(config: Path | None, variable: str, section: str, key: str, value: str) -> dict[str, str]:
    """Ansible's setting ``variable`` (``key`` in ``section`` of ansible.cfg) set to ``value`` for the run,
    unless the user set it in the environment or in the ansible.cfg ansible-playbook reads: theirs applies."""
    if variable in os.environ or cfg_value(config, section, key) is not None:
        return {}
    return {variable: value}


def vars_plugins_stage(config: Path | None) -> dict[str, str]:
    """Vars plugins (host_vars/group_vars beside the inventory, the user's own) run once, when the
    inventory is read, unless the user chose otherwise: Ansible's default runs them again for every task
    and host, a cost that grows with the fleet and gives a run the same values."""
    return unless_chosen(config, "ANSIBLE_RUN_VARS_PLUGINS", "defaults", "run_vars_plugins", "start")


def inventory_strictness(config: Path | None) -> dict[str, str]:
    """An inventory source Ansible cannot parse fails the run, unless the user chose otherwise. Ansible's
    default only warns and goes on with what it read: a YAML inventory whose plugin stopped at a bad host
    (``w2[prod]`` reads as a range) leaves the hosts and groups read before it, and a run would then work
    on part of the fleet and say nothing of the rest."""
    return unless_chosen(
        config, "ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED", "inventory", "any_unparsed_is_failed", "True"
    )


def own_control_path_dir(config: Path | None) -> Path | None:
    """A new directory for this run's SSH master connections, unless the user chose where they go (then
    None). Ansible's default directory (~/.ansible/cp) is shared by every run: after a network outage, a
    run started while an earlier run's master connection to a host still lingers (ControlPersist) sends
    its sessions down that connection's dead TCP stream and waits on it; long enough, and the host is
    reported unreachable ("Timeout waiting for privilege escalation prompt"), though it answers a new
    connection at once. The directory is made where the socket paths stay within the Unix limit (the
    temporary directory, else /tmp); where neither does, Ansible's default stays (None)."""
    chosen = ("ANSIBLE_SSH_CONTROL_PATH", "ANSIBLE_SSH_CONTROL_PATH_DIR")
    if any(name in os.environ for name in chosen) or any(
        cfg_value(config, "ssh_connection", key) is not None for key in ("control_path", "control_path_dir")
    ):
        return None
    longest = len(os.fsencode(CONTROL_DIR_PREFIX)) + len("/12345678") + CONTROL_SOCKET_NAME
    for base in dict.fromkeys((tempfile.gettempdir(), "/tmp")):
        if len(os.fsencode(base)) + longest <= SOCKET_PATH_MAX and os.access(base, os.W_OK | os.X_OK):
            directory = Path(tempfile.mkdtemp(prefix=CONTROL_DIR_PREFIX, dir=base))
            leftovers.claim(directory)
            return directory
    return None


def close_connections(directory: Path, wait: float = 5.0) -> None:
    """End the master connections a run left in its own directory (each would otherwise linger for
    ControlPersist) and remove the directory."""
    sockets = [path for path in directory.iterdir() if path.is_socket()] if directory.is_dir() else []
    ssh = shutil.which("ssh")
    stopping = [
        subprocess.Popen(
            [ssh, "-F", "none", "-o", f"ControlPath={path}", "-O", "exit", "cargoship"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for path in (sockets if ssh else [])
    ]
    deadline = time.monotonic() + wait
    for process in stopping:
        try:
            process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    shutil.rmtree(directory, ignore_errors=True)


def ssh_args(config: Path | None) -> str:
    """The ssh_args in force (environment, else ansible.cfg, else Ansible's default without compression),
    keepalives appended."""
    args = os.environ.get("ANSIBLE_SSH_ARGS")
    if args is None:
        args = cfg_value(config, "ssh_connection", "ssh_args")
    return f"{DEFAULT_SSH_ARGS if args is None else args} {SSH_KEEPALIVE}".strip()


def forks(requested: int | None, config: Path | None) -> int | None:
    """--concurrency, else what the user set (ANSIBLE_FORKS, ansible.cfg), else DEFAULT_FORKS."""
    if requested is not None:
        return requested
    if "ANSIBLE_FORKS" in os.environ or cfg_value(config, "defaults", "forks") is not None:
        return None
    return DEFAULT_FORKS


def new_run_id() -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + secrets.token_hex(3)


def run_playbook(options: RunOptions, on_event=None, interrupted: threading.Event | None = None) -> RunOutcome:
    """One playbook run in a fresh private data dir (a reused one would keep the previous command line).
    ``interrupted``: the caller's own record of a stop signal, set by its handler before the run began too
    (the run then stops at once); by default, one of the run's own."""
    run_id = options.extravars.setdefault("cargoship_run_id", new_run_id())
    # What earlier runs killed outright (SIGKILL) left in the temporary directory goes first.
    leftovers.sweep(close_connections)
    private = Path(tempfile.mkdtemp(prefix=leftovers.RUN_PREFIX))
    leftovers.claim(private)
    report_path = private / "report.json"
    config = ansible_cfg()
    control_dir = own_control_path_dir(config)
    cmdline = ["--check", "--diff"] if options.dry_run else []
    if options.vault_password_file:
        cmdline += ["--vault-password-file", shlex.quote(str(options.vault_password_file))]
    if "become" in options.passwords:
        cmdline += ["--ask-become-pass"]
    if "vault" in options.passwords:
        cmdline += ["--ask-vault-pass"]
    for vault_id in options.vault_ids:
        cmdline += ["--vault-id", shlex.quote(vault_id)]
    for path in options.user_var_files:
        cmdline += ["--extra-vars", shlex.quote(f"@{path}")]
    # The extra vars (-e KEY=VALUE may hold a credential) go in a private file that is gone once the
    # playbook has read it: never on a command line (every local user can read those in /proc), never
    # in a file of the run's directory that outlives the start.
    extra_vars_file = private_file(private / "extra-vars.json", json.dumps({**options.user_vars, **options.extravars}))
    cmdline += ["--extra-vars", shlex.quote(f"@{extra_vars_file}")]
    envvars = {
        # Ours in front of the user's own collection path, which stays (their hooks and inventory plugins).
        "ANSIBLE_COLLECTIONS_PATH": run_collections_path(config),
        "ANSIBLE_CALLBACKS_ENABLED": "cargoship.engine.report,cargoship.engine.payload_cache",
        # ansible-runner turns host key checking off unless told otherwise; cargoship keeps it on.
        "ANSIBLE_HOST_KEY_CHECKING": "True",
        "ANSIBLE_PIPELINING": "True",
        "ANSIBLE_SSH_ARGS": ssh_args(config),
        "ANSIBLE_FORCE_COLOR": "False",
        "CARGOSHIP_REPORT_JSON": str(report_path),
        # So that an input error in a -e value names the command line, not this short-lived file.
        "CARGOSHIP_EXTRA_VARS_FILE": str(extra_vars_file),
        # Where the lock keeper says why, if it has to stop the run (a lock it cannot keep fresh).
        "CARGOSHIP_KEEPER_REPORT": str(private / "keeper-stop.txt"),
        # Where the lock keeper names itself, so that this command notices if it dies under the run.
        "CARGOSHIP_KEEPER_PIDFILE": str(private / "keeper.pid"),
        # The user's ansible.cfg, as ansible-playbook would find it from here.
        **({"ANSIBLE_CONFIG": str(config)} if config else {}),
        **vars_plugins_stage(config),
        **inventory_strictness(config),
        **({"ANSIBLE_SSH_CONTROL_PATH_DIR": str(control_dir)} if control_dir else {}),
        "CARGOSHIP_CONTROL_PID": f"{socket.gethostname()}:{os.getpid()}",
        # The run must not outlive this process: the lock keeper ends it if this process dies.
        "CARGOSHIP_CLI_PID": str(os.getpid()),
        # The ansible-playbook installed beside this cargoship, also when cargoship is called by its path.
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    interrupted = interrupted or threading.Event()
    # Ctrl-C, and how CI systems and terminals cancel a job (SIGTERM, SIGHUP), all stop the run the same
    # way: the command then puts back the nodes it had started on and releases its locks.
    previous = {sig: signal.signal(sig, lambda *_: interrupted.set()) for sig in STOP_SIGNALS}
    # ansible-runner looks at cancel_callback between waits for output of this length (5 s by default):
    # Ctrl-C would take up to 5 s to stop the run, long enough for a node to move on. Given as a file:
    # with suppress_env_files, ansible-runner drops the settings it is given when env/settings is absent.
    settings = {"pexpect_timeout": 0.25}
    (private / "env").mkdir(mode=0o700)
    private_file(private / "env" / "settings", json.dumps(settings))
    handler = GuardedHandler(
        on_event, started=lambda: extra_vars_file.unlink(missing_ok=True), keep_events=options.keep_artifacts
    )
    try:
        thread, runner = ansible_runner.run_async(
            private_data_dir=str(private),
            playbook=str(playbook_path(options.playbook)),
            inventory=[str(path.resolve()) for path in options.inventories],
            cmdline=" ".join(cmdline) or None,
            envvars=envvars,
            # Nothing of the run's settings written under env/ (ansible-runner would write the extra
            # vars, the environment and the become and vault passwords there, in plain text).
            suppress_env_files=True,
            # ansible-runner dumps the whole environment (K8S_AUTH_API_KEY, say) into artifacts/*/command
            # before it starts ansible-playbook: gone as soon as it runs.
            status_handler=drop_command_dump,
            limit=options.limit,
            forks=forks(options.forks, config),
            verbosity=options.verbosity or None,
            quiet=True,
            event_handler=handler,
            cancel_callback=lambda: interrupted.is_set() or handler.failed,
            settings=settings,
            # Facts stay in memory (Ansible's default, or the cache the user's ansible.cfg names), not in
            # ansible-runner's file cache, which every task of every host looked up on disk.
            fact_cache_type="memory",
            # Answered through ansible-runner's terminal, never written to the run's directory.
            passwords={PROMPTS[kind]: value for kind, value in options.passwords.items()} or None,
        )
        watch_keeper(thread, private, interrupted)
        thread.join()
        report = json.loads(report_path.read_text()) if report_path.exists() else None
        unreachable = sorted((runner.stats or {}).get("dark", {}) or {})
        failed = runner.rc != 0 or report is None or interrupted.is_set() or handler.failed
        # Ansible's output of a run that did not succeed, read and masked once for its log and its error lines.
        output = masked_stdout(runner) if failed else None
        return RunOutcome(
            rc=(runner.rc or (1 if handler.failed else 0)) if runner.rc is not None else 1,
            report=report,
            unreachable=unreachable,
            run_id=run_id,
            interrupted=interrupted.is_set(),
            ansible_errors=error_lines(output) if output is not None else [],
            artifacts=private if options.keep_artifacts else None,
            keeper_stop=(private / "keeper-stop.txt").read_text().strip()
            if (private / "keeper-stop.txt").exists()
            else None,
            log=keep_log(output, run_id, options.playbook) if output is not None else None,
            handler_error=handler.error,
        )
    finally:
        extra_vars_file.unlink(missing_ok=True)
        if options.keep_artifacts:
            for dump in private.glob("artifacts/*/command"):
                dump.unlink(missing_ok=True)
            leftovers.disown(private)
        else:
            shutil.rmtree(private, ignore_errors=True)
        if control_dir:
            close_connections(control_dir)
        # Last: a stop signal while the run's connections close (up to seconds) is the run's, not an abort.
        for sig, handler in previous.items():
            signal.signal(sig, handler)


KEEPER_WATCH_SECONDS = 1.0


def keeper_died(private: Path) -> int | None:
    """The pid of the run's lock keeper if it has died under the run, else None. A keeper that ends with
    its run removes its pid file first; one that still names itself but is gone died (killed, say)."""
    pidfile = private / "keeper.pid"
    try:
        pid = int(pidfile.read_text().strip())
    except (OSError, ValueError):
        return None
    if lock_keeper().alive(pid):
        return None
    return pid if pidfile.exists() else None


def watch_keeper(thread: threading.Thread, private: Path, interrupted: threading.Event) -> None:
    """While the run lives, look every second that its lock keeper does too. Without it the run's locks
    go stale while it goes on, and another run may take its hosts: the run is stopped as the keeper
    stops it when a lock cannot be kept fresh (as Ctrl-C: nodes in flight are put back)."""
    while thread.is_alive():
        thread.join(KEEPER_WATCH_SECONDS)
        pid = keeper_died(private) if not interrupted.is_set() else None
        if pid is not None and thread.is_alive():
            report = private / "keeper-stop.txt"
            if not report.exists():
                report.write_text(
                    f"the lock keeper of this run (pid {pid}) is gone, so its locks would go stale while it went "
                    "on; the run was stopped\n"
                )
            interrupted.set()


def private_file(path: Path, text: str) -> Path:
    """A new file only its owner can read, from its creation; never through a link planted at path."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    return path


def drop_command_dump(status: dict, runner_config) -> None:
    """Remove ansible-runner's artifacts/<ident>/command (the command line and the whole environment) once
    the playbook runs: it is written just before, and read by nothing of cargoship's."""
    if status.get("status") != "starting":
        (Path(runner_config.artifact_dir) / "command").unlink(missing_ok=True)


ANSI = re.compile(r"\x1b\[[0-9;]*m")
# Under an error, Ansible quotes the lines of the user's file it points at (Origin: file:line:column): a
# line number and the line, then a caret. The file may be a vars file holding a credential.
SOURCE_LINE = re.compile(r"^\s*(\d+\s|\^)")
WITHHELD_SOURCE = "  (the quoted source lines are withheld: they may hold a credential)"


def masked_output(text: str) -> str:
    """Ansible's output as the command shows or keeps it: no colour codes, and the source lines Ansible
    quotes under an error withheld. Module arguments and results are masked by Ansible itself (no_log)."""
    lines, quoting = [], False
    for line in ANSI.sub("", text).splitlines():
        if line.strip().startswith("Origin:"):
            quoting = True
            lines.append(line)
            continue
        if quoting and (not line.strip() or SOURCE_LINE.match(line)):
            if lines[-1] != WITHHELD_SOURCE and line.strip():
                lines.append(WITHHELD_SOURCE)
            continue
        quoting = False
        lines.append(line)
    return "\n".join(lines) + ("\n" if text.endswith("\n") else "")


def log_directory() -> Path:
    """Where failed runs' logs are kept: $XDG_STATE_HOME/cargoship/logs (~/.local/state/cargoship/logs)."""
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "cargoship" / "logs"


def masked_stdout(runner) -> str | None:
    """ansible-playbook's output of the run as the command shows or keeps it (masked_output); None if none."""
    source = Path(runner.config.artifact_dir) / "stdout"
    try:
        return masked_output(source.read_text(errors="replace"))
    except OSError:
        return None


def keep_log(output: str, run_id: str, playbook: str) -> Path | None:
    """Ansible's (masked) output of a run that did not succeed, kept private (0600 in a 0700 directory)."""
    directory = log_directory()
    try:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        # Never through a link (the directory, or a file planted under the run's name), never into a
        # directory that another user could read or own.
        info = os.lstat(directory)
    except OSError:
        return None  # a home that cannot be written (a read-only container, HOME unset): no log, the errors stand
    if stat.S_ISLNK(info.st_mode) or info.st_uid != os.geteuid() or stat.S_IMODE(info.st_mode) & 0o077:
        return None
    try:
        return private_file(directory / f"{run_id}-{playbook}.log", output)
    except FileExistsError:
        return None


# The closing line of a Python traceback: the exception's (dotted) name and its message.
EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit)\b.*")


UNPARSED = "[WARNING]: Failed to parse inventory with"


def error_lines(output: str) -> list[str]:
    """The error and origin lines of ansible-playbook's (masked) output. The source excerpt Ansible prints
    under an error is left out by the masking: it quotes the user's file, which may hold a credential."""
    kept, in_error = [], False
    for line in output.splitlines():
        if line.strip().startswith(UNPARSED):
            # Why each inventory plugin could not read a source (the error itself says only that none could).
            kept.append(line.strip().removeprefix("[WARNING]: "))
            in_error = False
        elif line.strip().startswith(("[ERROR]", "ERROR!", "Origin:")):
            kept.append(line.strip())
            in_error = line.strip().startswith(("[ERROR]", "ERROR!"))
        elif in_error and line[:1].isspace() and line.strip():
            # The message's own further lines (every problem of a failed input check, say), up to its origin.
            kept.append("  " + line.strip())
        else:
            in_error = False
    if not kept and "Traceback (most recent call last):" in output:
        # Ansible that fails before it runs anything (a home it cannot write its temporary files in, say)
        # ends with a traceback: its last line says what went wrong.
        kept = [line.strip() for line in output.splitlines() if EXCEPTION_LINE.match(line)][-1:]
    return kept
