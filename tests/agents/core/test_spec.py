"""An agent's credentials, found by their place in its config whatever their names."""

from __future__ import annotations

from agents.core.spec import AgentSpec


def test_credentials_are_found_by_place_not_by_name() -> None:
    spec = AgentSpec.model_validate(
        {
            "name": "clerk",
            "model": {
                "name": "openai/gpt-4o-mini",
                "params": {
                    "api_base": "https://fn.example/api/chat?code=azure-code-1234&v=2024",
                    "extra_headers": {"Ocp-Apim-Subscription-Key": "apim-key-5678"},
                    "temperature": 0.5,
                },
            },
            "mcp": [
                {"name": "files", "command": "serve-files", "env": ["FILES_TOKEN_VAR"]},
                {
                    "name": "crm",
                    "url": "https://crm.example/mcp?sig=crm-signature-99",
                    "headers": {"X-Tenant": "CRM_TENANT_VAR"},
                },
            ],
        }
    )
    environ = {"FILES_TOKEN_VAR": "files-value-abc", "CRM_TENANT_VAR": "crm-tenant-def"}
    found = spec.credentials(environ | {"UNRELATED": "not-a-secret-at-all"})
    assert {
        "azure-code-1234",
        "apim-key-5678",
        "files-value-abc",
        "crm-tenant-def",
        "crm-signature-99",
    } <= found
    assert "not-a-secret-at-all" not in found and "0.5" not in found


def test_an_a2a_peers_header_variables_are_credentials() -> None:
    spec = AgentSpec.model_validate(
        {
            "name": "team_b",
            "a2a": {"url": "https://b.example?token=peer-token-77", "headers": {"X-Key": "B_KEY"}},
        }
    )
    assert spec.credentials({"B_KEY": "peer-key-value-11"}) == {
        "peer-token-77",
        "peer-key-value-11",
    }
