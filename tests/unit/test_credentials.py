"""Missing credentials are one line before any session starts (issue #15, L-11)."""

from __future__ import annotations

from pathlib import Path

import pytest

from flower.core.credentials import CREDENTIAL_VARIABLES, check_credentials
from flower.errors import ConfigError


def test_no_credentials_is_one_line_naming_the_variables(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        check_credentials({"HOME": str(tmp_path)})
    message = str(caught.value)
    assert "\n" not in message
    assert "ANTHROPIC_API_KEY" in message and "ANTHROPIC_AUTH_TOKEN" in message and "ANTHROPIC_BASE_URL" in message


@pytest.mark.parametrize("name", CREDENTIAL_VARIABLES)
def test_any_one_variable_is_enough(tmp_path: Path, name: str) -> None:
    check_credentials({"HOME": str(tmp_path), name: "x"})


def test_blank_values_do_not_count_but_a_cli_login_does(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "ANTHROPIC_API_KEY": "  "}
    with pytest.raises(ConfigError):
        check_credentials(env)
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude" / ".credentials.json").write_text("{}")
    check_credentials(env)
    with pytest.raises(ConfigError):  # the CLI looks in CLAUDE_CONFIG_DIR when it is set
        check_credentials({**env, "CLAUDE_CONFIG_DIR": str(tmp_path / "elsewhere")})
