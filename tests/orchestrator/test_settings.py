"""The settings, as the environment gives them and as the documentation lists them."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import AliasChoices

from orchestrator.settings import Settings

SETTINGS_PAGE = Path("docs/settings.md")


def _variables(name: str) -> list[str]:
    field = Settings.model_fields[name]
    alias = field.validation_alias
    if isinstance(alias, AliasChoices):
        return [str(choice) for choice in alias.choices]
    return [f"BATON_{name.upper()}"]


@pytest.mark.parametrize("name", sorted(Settings.model_fields))
def test_every_setting_is_documented_under_its_variable(name: str) -> None:
    page = SETTINGS_PAGE.read_text(encoding="utf-8")
    assert any(f"`{variable}`" in page for variable in _variables(name)), (
        f"docs/settings.md does not list {_variables(name)[0]} (Settings.{name})"
    )


def test_keys_and_origins_are_read_comma_separated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BATON_API_KEYS", " k1, ,k2 ")
    monkeypatch.setenv("BATON_ALLOWED_ORIGINS", "https://a.example,http://b.example:8080")
    monkeypatch.setenv("RAY_ADDRESS", "ray://10.0.0.5:10001")
    settings = Settings()
    assert settings.api_keys == ("k1", "k2")
    assert settings.allowed_origins == ("https://a.example", "http://b.example:8080")
    assert settings.ray_address == "ray://10.0.0.5:10001"
