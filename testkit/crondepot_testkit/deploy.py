"""The reference deployment's files (``deploy/``), read by the harnesses that test it.

The chaos and failover runs take their settings from here, so what is shipped is what is
tested: the Patroni and etcd templates (``deploy/patroni``, ``deploy/etcd``), rendered with
only a host's own values (addresses, ports, folders, passwords), and the environment files
the units load (``deploy/env``). A placeholder left without a value is an error, never an
empty string in a configuration.
"""

from __future__ import annotations

import string
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
PATRONI = DEPLOY / "patroni" / "patroni.yml"
ETCD = DEPLOY / "etcd" / "etcd.conf.yml"
ENV = DEPLOY / "env"


def render(path: Path, values: dict[str, str]) -> str:
    """``path`` with its ``${NAME}`` placeholders replaced; ValueError naming any left
    without a value (a misspelt one would otherwise reach the configuration as text)."""
    template = string.Template(path.read_text())
    missing = sorted({name for name in template.get_identifiers() if name not in values})
    if missing:
        raise ValueError(f"{path.name}: no value for {', '.join(missing)}")
    return template.substitute(values)


def render_yaml(path: Path, values: dict[str, str]) -> dict[str, Any]:
    loaded = yaml.safe_load(render(path, values))
    if not isinstance(loaded, dict):
        raise ValueError(f"{path.name}: expected a mapping at the top")
    return loaded


def read_env(name: str) -> dict[str, str]:
    """``deploy/env/<name>.env`` as systemd's EnvironmentFile reads these files: KEY=VALUE
    lines, comments and blank lines skipped. Quotes are refused: the files use none, and
    systemd would strip them where a naive reader would not."""
    path = ENV / f"{name}.env"
    values: dict[str, str] = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.isidentifier() or value[:1] in ("'", '"'):
            raise ValueError(f"{path.name}:{number}: expected KEY=VALUE without quotes, "
                             f"got {line!r}")
        values[key] = value
    return values


def process_env(kind: str) -> dict[str, str]:
    """What the unit of ``kind`` (api, scheduler, worker) loads: crondepot.env, then its own."""
    return {**read_env("crondepot"), **read_env(kind)}


def database_url(hosts: list[str], *, user: str, dbname: str, password: str = "") -> str:
    """The shipped multi-host URL (deploy/env/crondepot.env) with another host list, role
    and database: its query string (``target_session_attrs=read-write``) is kept as is."""
    shipped = urlsplit(read_env("crondepot")["CRONDEPOT_DATABASE_URL"])
    secret = f":{password}" if password else ""
    return f"postgresql://{user}{secret}@{','.join(hosts)}/{dbname}?{shipped.query}"
