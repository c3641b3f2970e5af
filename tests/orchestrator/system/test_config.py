from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from agents.core.errors import ConfigError
from orchestrator.system.config import load_config, parse_config


def _errors(text: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_config(textwrap.dedent(text), "team.yaml")
    return [str(i) for i in info.value.issues if i.severity == "error"]


def test_the_shipped_default_config_is_valid_with_three_levels_of_delegation() -> None:
    system = load_config(Path("configs/default.yaml"))
    assert system.entry == "coordinator"
    assert len(system.topology.delegates("coordinator")) >= 3
    assert system.topology.max_static_depth() == 3
    assert any(agent.tools for agent in system.config.agents)
    assert system.warnings == []


def test_a_delegation_cycle_is_an_error_that_prints_the_cycle() -> None:
    errors = _errors("""
        agents:
          - name: a
            delegates: [b]
          - name: b
            delegates: [c]
          - name: c
            delegates: [a]
    """)
    assert len(errors) == 1
    assert "delegation cycle a -> b -> c -> a" in errors[0]
    assert errors[0].startswith("team.yaml:4:")  # the `delegates` key of agent a


def test_cycles_are_accepted_when_the_config_opts_in() -> None:
    system = parse_config(
        textwrap.dedent("""
        allow_cycles: true
        agents:
          - {name: a, delegates: [b]}
          - {name: b, delegates: [a]}
    """)
    )
    assert system.topology.cycles() == [["a", "b"]]
    assert system.topology.max_static_depth() is None


def test_unknown_delegate_is_reported_with_file_line_and_field() -> None:
    errors = _errors("""
        agents:
          - name: a
            delegates:
              - b
              - ghost
          - name: b
    """)
    assert errors == ["team.yaml:6:9: error: agents[0].delegates[1]: unknown agent 'ghost'"]


def test_every_error_is_reported_not_just_the_first() -> None:
    errors = _errors("""
        agents:
          - name: a
            delegates: [nobody]
            tools: [configs.tools:no_such_tool]
          - name: a
    """)
    assert any("unknown agent 'nobody'" in e for e in errors)
    assert any("unknown tool" in e and "no_such_tool" in e for e in errors)
    assert any("duplicate agent 'a'" in e and e.startswith("team.yaml:6:") for e in errors)


def test_schema_errors_name_the_field_and_line() -> None:
    errors = _errors("""
        limits:
          max_depth: zero
        agents:
          - name: a
            max_step: 3
    """)
    assert "team.yaml:3:3: error: limits.max_depth: Input should be a valid integer" in errors[0]
    assert "team.yaml:6:5: error: agents[0].max_step: unknown field 'max_step'" in errors[1]


def test_bad_yaml_reports_line_and_column() -> None:
    errors = _errors("agents:\n  - name: a\n    delegates: [b\n  - name: b\n")
    assert len(errors) == 1
    assert errors[0].startswith("team.yaml:4:")
    assert "YAML syntax" in errors[0]


def test_duplicate_yaml_keys_are_errors() -> None:
    errors = _errors("agents:\n  - name: a\n    name: b\n")
    assert errors == ["team.yaml:3:5: error: agents[0].name: duplicate key 'name'"]


def test_unreachable_agents_are_warnings_not_errors() -> None:
    system = parse_config("agents:\n  - name: a\n  - name: lonely\n", "team.yaml")
    assert [str(w) for w in system.warnings] == [
        "team.yaml:3:5: warning: agents[1].name: agent 'lonely' is unreachable from the "
        "entry agent 'a'"
    ]


def test_star_delegates_to_every_other_agent() -> None:
    system = parse_config(
        textwrap.dedent("""
        agents:
          - {name: hub, delegates: "*"}
          - {name: x}
          - {name: y}
    """)
    )
    assert system.topology.delegates("hub") == ["x", "y"]


def test_an_unreadable_file_is_a_config_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"missing\.yaml: error: cannot read file"):
        load_config(tmp_path / "missing.yaml")


def test_model_accepts_a_plain_litellm_string() -> None:
    system = parse_config("agents:\n  - name: a\n    model: openai/gpt-4o-mini\n")
    assert system.agent("a").model.name == "openai/gpt-4o-mini"


def test_a_remote_agent_is_a_leaf_with_a_web_url() -> None:
    errors = _errors("""
        agents:
          - name: a
            delegates: [far]
          - name: far
            tools: [configs.tools:calculate]
            a2a: {url: "http://127.0.0.1:9/"}
          - name: wrong
            a2a: {url: "ftp://example.org"}
    """)
    assert len(errors) == 2, errors
    assert errors[0].startswith("team.yaml:5:")
    assert "agents[1]: a remote agent (a2a) does its work elsewhere: remove tools" in errors[0]
    assert "agents[2].a2a.url: url 'ftp://example.org' must start with http" in errors[1]


def test_a_remote_agents_header_variables_must_be_forwarded() -> None:
    errors = _errors("""
        agents:
          - name: a
            delegates: [far]
          - name: far
            a2a: {url: "https://example.org", headers: {Authorization: TEAM_KEY}}
    """)
    assert len(errors) == 1, errors
    assert "agents[1].a2a.headers.Authorization" in errors[0]
    assert "TEAM_KEY must also be listed under the top-level env:" in errors[0]


def test_the_support_example_uses_each_agent_feature_and_baton_check_lists_them() -> None:
    from typer.testing import CliRunner

    from orchestrator.cli import app

    system = load_config(Path("configs/support.yaml"))
    assert system.topology.handoffs("triage") == ["billing"]
    done = CliRunner().invoke(
        app, ["check", "configs/support.yaml", "--offline"], env={"COLUMNS": "200"}
    )
    assert done.exit_code == 0, done.output
    for line in (
        "triage: hands the conversation over to: billing",
        "triage: hook: configs.hooks:AuditTrail",
        "triage: step rule 1: when step 1: instruction Hand billing questions over",
        "triage: guardrail on its input: no-card-numbers",
        "billing: guardrail on its output: no-promises",
        "billing: context: summarize to fit the model's window (keeps the last 6)",
        "checker: answers JSON: an inline JSON Schema (auto mode: native: baton/offline takes a "
        "JSON Schema, 2 retries)",
    ):
        assert line in done.output, done.output


def test_systems_with_another_config_or_another_store_never_share_actors() -> None:
    # A second service with the same config but another run store must not find the first
    # one's ledger by name: its runs' steps and events would be written to the first store.
    team = load_config(Path("configs/default.yaml"))
    changed = parse_config(Path("configs/default.yaml").read_text() + "\nallow_cycles: true\n")
    a, b = "sqlite+aiosqlite:////srv/a.db", "postgresql+asyncpg://db/runs"
    assert team.actor_prefix(a) == team.actor_prefix(a)  # replicas on one store share
    names = {team.actor_prefix(None), team.actor_prefix(a), team.actor_prefix(b)}
    assert len(names | {changed.actor_prefix(a)}) == 4
    assert all(name.startswith(f"{team.config.name}-") for name in names)


def test_actors_of_another_revision_of_the_agent_code_are_never_found_by_name(
    tmp_path: Path,
) -> None:
    # A service's actors outlive it; after an upgrade, the restarted service must start its
    # own rather than call the old code's (same config, same store) with calls it does not take.
    from orchestrator.system.revision import code_revision

    system = load_config("configs/default.yaml")
    prefix = system.actor_prefix("sqlite:///runs.db")
    assert code_revision() in prefix
    assert prefix == load_config("configs/default.yaml").actor_prefix("sqlite:///runs.db")
    package = tmp_path / "agents"
    package.mkdir()
    (package / "host.py").write_text("def invoke(agent, delegation): ...\n")
    before = code_revision((package,))
    (package / "host.py").write_text("def invoke(sealed): ...\n")
    changed = code_revision.__wrapped__((package,))  # uncached: the same path, new code
    assert changed != before
    (package / "host.py").write_text("def invoke(agent, delegation): ...\n")
    assert code_revision.__wrapped__((package,)) == before


def test_a_teams_version_is_its_release_label_and_its_configs_digest() -> None:
    team = "name: versioned\nagents:\n  - name: solo\n"
    plain = parse_config(team, "a.yaml")
    labelled = parse_config("release: v2\n" + team, "b.yaml")
    assert plain.version == plain.fingerprint and len(plain.version) == 10
    assert labelled.version == f"v2+{labelled.fingerprint}"
    assert labelled.fingerprint != plain.fingerprint  # the label is part of the config
    with pytest.raises(ConfigError, match="release"):
        parse_config("release: 'v 2!'\n" + team, "c.yaml")


def test_replicas_that_follow_the_load_are_read_as_bounds() -> None:
    team = parse_config(
        """
name: scaled
shared_host: {replicas: {min: 1, max: 4}}
agents:
  - name: lead
    delegates: [coder]
  - name: coder
    ray: {replicas: {min: 2, max: 8, target: 2}, num_cpus: 1}
""",
        "scaled.yaml",
    )
    coder = team.agent("coder").ray
    assert coder.replicas == 2 and coder.autoscale is not None
    assert (coder.autoscale.min, coder.autoscale.max, coder.autoscale.target) == (2, 8, 2)
    assert team.config.shared_host.autoscale is not None and team.autoscaled
    with pytest.raises(ConfigError, match=r"max \(1\) is below min \(3\)"):
        parse_config("agents:\n  - name: a\n    ray: {replicas: {min: 3, max: 1}}\n", "bad.yaml")
