"""Benchmark: Ansible's control-host work under two virtualenvs (two builds of Python), alternated.

    .venv/bin/python tests/bench/python_build.py .venv /tmp/vpyenv --rounds 5

Each round runs, in each virtualenv in turn, ansible-playbook over tests/bench/controller_work.yml: thirty
hosts on the local connection, loops of set_fact and debug with filters and templating, a module run per
host (the modules run on the distribution's /usr/bin/python3 under both, so that only the control host's
Python differs), with the forks the cargoship command gives a run by default (``runner.DEFAULT_FORKS``).
It prints the CPU of each run (the process and all it started, from rusage) and each virtualenv's median.
The machine's drift from minute to minute falls on both alike; compare medians, not single runs.

Make the second virtualenv from another Python with the same packages, e.g. pyenv's:

    .venv/bin/uv venv --python ~/.pyenv/versions/3.11.7/bin/python3.11 /tmp/vpyenv
    .venv/bin/uv pip install --compile-bytecode --python /tmp/vpyenv/bin/python -e '.[test]'
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from cargoship_runner.runner import DEFAULT_FORKS

HERE = Path(__file__).resolve().parent
HOSTS = 30


def cpu_of(command: list[str], env: dict[str, str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed (rc {done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("venvs", nargs=2, type=Path, help="two virtualenvs with ansible-core installed")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="python-build-") as tmp:
        inventory = Path(tmp) / "hosts.ini"
        inventory.write_text("".join(f"h{n} ansible_python_interpreter=/usr/bin/python3\n" for n in range(HOSTS)))
        config = Path(tmp) / "ansible.cfg"
        config.write_text(f"[defaults]\nforks = {DEFAULT_FORKS}\n")
        env = {**os.environ, "ANSIBLE_CONFIG": str(config), "ANSIBLE_LOCAL_TEMP": tmp}
        spent: dict[Path, list[float]] = {venv: [] for venv in args.venvs}
        for round_ in range(1, args.rounds + 1):
            for venv in args.venvs:
                command = [
                    str(venv / "bin" / "ansible-playbook"),
                    "-i",
                    str(inventory),
                    str(HERE / "controller_work.yml"),
                ]
                seconds = cpu_of(command, env)
                spent[venv].append(seconds)
                print(f"round {round_}  {venv}: {seconds:.2f} s of CPU", flush=True)
    for venv, figures in spent.items():
        python = subprocess.run(
            [str(venv / "bin" / "python"), "-c", "import sys; print(sys.version.split()[0], sys._base_executable)"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        print(
            f"{venv} ({python}): median {statistics.median(figures):.2f} s, runs {', '.join(f'{f:.2f}' for f in figures)}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
