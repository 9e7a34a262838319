"""The ``cargoship`` command: a thin driver of the cargoship.engine playbooks."""

__version__ = "0.1.0"
