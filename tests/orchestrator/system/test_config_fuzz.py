"""Config fuzzing: whatever the file holds, `baton check`'s loader answers with config errors
(never another exception), and a delegation cycle is reported exactly when there is one."""

from __future__ import annotations

from pathlib import Path

import networkx as nx
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents.core.errors import ConfigError
from orchestrator.system.config import load_config, parse_config

NAMES = [f"a{i}" for i in range(8)]

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=20)
)
KEYS = ["agents", "name", "model", "delegates", "limits", "tools", "env", "entry", "mcp"]
documents = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


def _only_config_errors(load: object) -> None:
    try:
        load()  # type: ignore[operator]
    except ConfigError as exc:
        assert exc.issues and all(i.message for i in exc.issues)


@settings(max_examples=150, deadline=None)
@given(documents)
def test_any_yaml_document_gets_config_errors_or_loads(document: object) -> None:
    _only_config_errors(lambda: parse_config(yaml.safe_dump(document), "fuzz.yaml"))


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.binary(max_size=300))
def test_any_bytes_get_config_errors_or_load(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "fuzz.yaml"
    path.write_bytes(data)
    _only_config_errors(lambda: load_config(path))


@settings(max_examples=200, deadline=None)
@given(
    st.integers(min_value=1, max_value=8).flatmap(
        lambda n: st.tuples(
            st.just(n),
            st.lists(
                st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)).filter(
                    lambda e: e[0] != e[1]
                ),
                max_size=3 * n,
                unique=True,
            ),
        )
    )
)
def test_a_cycle_is_reported_exactly_when_the_graph_has_one(
    graph: tuple[int, list[tuple[int, int]]],
) -> None:
    n, edges = graph
    agents = [
        {"name": NAMES[i], "delegates": sorted({NAMES[b] for a, b in edges if a == i})}
        for i in range(n)
    ]
    expected = nx.DiGraph()
    expected.add_nodes_from(range(n))
    expected.add_edges_from(edges)
    has_cycle = not nx.is_directed_acyclic_graph(expected)
    try:
        parse_config(yaml.safe_dump({"agents": agents}), "graph.yaml")
        reported = False
    except ConfigError as exc:
        errors = [i for i in exc.issues if i.severity == "error"]
        assert errors and all("delegation cycle" in i.message for i in errors), errors
        reported = True
    assert reported == has_cycle
