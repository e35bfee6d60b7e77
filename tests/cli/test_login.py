"""login / logout / whoami against the live server; the config file holds the token."""

from __future__ import annotations

import json
import stat

import yaml

from tests.cli.conftest import Org


def bare_env(org: Org) -> dict[str, str]:
    """No APPORTION_SERVER/TOKEN: only the config file counts."""
    return {"APPORTION_CONFIG": str(org.config), "APPORTION_SERVER": "", "APPORTION_TOKEN": "",
            "COLUMNS": "120"}


def test_login_stores_token_0600_then_whoami_and_logout(org: Org) -> None:
    token = org.token("alice", "viewer")
    env = bare_env(org)
    login = org.cli("login", "--server", org.url, "--token", token, env=env)
    assert login.exit_code == 0, login.stderr
    assert "logged in to" in login.stdout and "as alice (role viewer" in login.stdout
    assert stat.S_IMODE(org.config.stat().st_mode) == 0o600
    stored = yaml.safe_load(org.config.read_text())
    assert stored == {"server": org.url, "token": token}

    who = org.cli("whoami", env=env)
    assert who.exit_code == 0
    header, row = who.stdout.splitlines()
    assert header.split() == ["NAME", "ROLE", "TEAMS", "POOL", "SERVER"]
    assert row.split() == ["alice", "viewer", "-", "-", org.url]
    as_json = json.loads(org.cli("whoami", "-o", "json", env=env).stdout)
    assert as_json["name"] == "alice" and "token" not in as_json

    assert org.cli("logout", env=env).exit_code == 0
    assert "token" not in yaml.safe_load(org.config.read_text())
    after = org.cli("whoami", env=env)
    assert after.exit_code == 2 and "not logged in" in after.stderr


def test_login_prompts_for_the_token(org: Org) -> None:
    token = org.token("bob", "viewer")
    result = org.cli("login", "--server", org.url, env=bare_env(org), input=token + "\n")
    assert result.exit_code == 0, result.stderr
    assert "as bob" in result.stdout


def test_login_with_a_bad_token_stores_nothing(org: Org) -> None:
    result = org.cli("login", "--server", org.url, "--token", "apt_nothere0000_" + "x" * 30,
                     env=bare_env(org))
    assert result.exit_code == 1
    assert "refused this token" in result.stderr and "Traceback" not in result.output
    assert not org.config.exists()


def test_env_token_overrides_and_revoked_token_says_what_to_do(org: Org) -> None:
    token = org.admin.create_token("carol", "viewer")
    assert org.cli("whoami", token=token["token"]).exit_code == 0
    org.admin.revoke_token(token["id"])
    result = org.cli("whoami", token=token["token"])
    assert result.exit_code == 1
    assert "apportion login" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
