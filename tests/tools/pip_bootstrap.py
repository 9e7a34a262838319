"""Stand-in for the pip bootstrap script ansible-test downloads (from a host this machine cannot reach).

ansible-test runs it in each new sanity virtualenv with pip's arguments (e.g. ``pip==24.2``); here pip
comes from the interpreter's own ensurepip and then from PyPI at the version asked for.
"""

from __future__ import annotations

import subprocess
import sys

GET_PIP_ONLY_FLAGS = {"--no-setuptools", "--no-wheel"}

if __name__ == "__main__":
    subprocess.check_call([sys.executable, "-m", "ensurepip", "--default-pip"], stdout=subprocess.DEVNULL)
    arguments = [a for a in sys.argv[1:] if a not in GET_PIP_ONLY_FLAGS]
    subprocess.check_call([sys.executable, "-m", "pip", "install", "--quiet", *arguments])
