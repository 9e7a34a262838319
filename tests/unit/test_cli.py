from __future__ import annotations

from click.testing import CliRunner

from cargoship_runner import __version__
from cargoship_runner.cli import main


def test_version_names_the_program_and_version():
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"cargoship {__version__}"


def test_help_explains_the_tool():
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    assert "k3s or RKE2" in result.output
    assert "shows exactly what it would do" in " ".join(result.output.split())


def test_unknown_command_is_an_error():
    result = CliRunner().invoke(main, ["no-such-command"])
    assert result.exit_code == 2
    assert "No such command" in result.output
