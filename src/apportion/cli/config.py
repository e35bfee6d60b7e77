"""The user's CLI config file: server, token, default team, output format.

Where: ``$APPORTION_CONFIG`` if set, else ``<platformdirs user config dir>/apportion/config.yaml``.
It holds a bearer token, so it is written with mode 0600 (its directory 0700), and
rewritten atomically. ``APPORTION_SERVER`` / ``APPORTION_TOKEN`` override the file.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import yaml
from platformdirs import user_config_dir

SETTABLE_KEYS = ("server", "default_team", "output")
OUTPUT_FORMATS = ("table", "wide", "json", "yaml")


class ConfigError(Exception):
    """The config file cannot be read or a value is invalid."""


def config_path() -> Path:
    override = os.environ.get("APPORTION_CONFIG")
    if override:
        return Path(override).expanduser()
    return Path(user_config_dir("apportion")) / "config.yaml"


def load_config() -> dict[str, Any]:
    """The file's values, or ``{}`` when there is no file yet."""
    path = config_path()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as err:
        raise ConfigError(f"cannot read config file {path}: {err.strerror}") from err
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as err:
        raise ConfigError(f"config file {path} is not valid YAML: fix or delete it") from err
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must be a mapping: fix or delete it")
    return data


def save_config(values: dict[str, Any]) -> Path:
    """Write ``values`` (``None`` entries dropped) with mode 0600; returns the path."""
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    clean = {k: v for k, v in values.items() if v is not None}
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".config-", suffix=".yaml")
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            yaml.safe_dump(clean, handle, sort_keys=True)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    os.chmod(path, 0o600)
    return path


def normalize_key(key: str) -> str:
    """``default-team`` and ``default_team`` are the same key."""
    name = key.strip().replace("-", "_")
    if name not in SETTABLE_KEYS:
        raise ConfigError(
            f"unknown config key {key!r}: use one of {', '.join(SETTABLE_KEYS)}"
            " (the token is set by `apportion login`)"
        )
    return name


def check_value(key: str, value: str) -> str:
    if key == "output" and value not in OUTPUT_FORMATS:
        raise ConfigError(f"output must be one of {', '.join(OUTPUT_FORMATS)}, not {value!r}")
    if key == "server" and not value.startswith(("http://", "https://")):
        raise ConfigError(f"server must be an http:// or https:// URL, not {value!r}")
    return value


def effective_server(config: dict[str, Any]) -> str | None:
    return os.environ.get("APPORTION_SERVER") or config.get("server")


def effective_token(config: dict[str, Any]) -> str | None:
    return os.environ.get("APPORTION_TOKEN") or config.get("token")
