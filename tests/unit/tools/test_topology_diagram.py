"""Loading module:attr, the Mermaid and DOT diagrams, and ``kstreams describe``."""

from __future__ import annotations

import pytest

from kstreams.cli import main
from kstreams.tools.app_loader import TopologyLoadError, load_topology
from kstreams.tools.topology_diagram import diagram, to_dot, to_mermaid
from tests.unit.tools.topologies_for_tests import build

MODULE = "tests.unit.tools.topologies_for_tests"


@pytest.mark.parametrize("attr", ["topology", "build", "builder"])
def test_attr_may_be_a_topology_a_builder_or_a_function(attr):
    assert str(load_topology(f"{MODULE}:{attr}").describe()) == str(build().describe())


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("no-colon", "write module:attr"),
        ("no_such_module_xyz:t", "no module named 'no_such_module_xyz'"),
        (f"{MODULE}:missing", "has no attribute 'missing'"),
        (f"{MODULE}:not_a_topology", "is a int, not a Topology"),
        (f"{MODULE}:needs_argument", r"needs arguments \(name\)"),
    ],
)
def test_bad_specs_say_what_is_wrong(spec, message):
    with pytest.raises(TopologyLoadError, match=message):
        load_topology(spec)


def test_mermaid_has_subtopologies_topics_stores_and_flows():
    text = to_mermaid(build().describe())
    assert text.startswith("flowchart LR\n")
    assert 'subgraph sub_0["Sub-topology: 0"]' in text and 'subgraph sub_1["Sub-topology: 1"]' in text
    assert 'topic_words[/"words"/]' in text
    assert 'store_word_2d_counts[("Store: word-counts")]' in text
    # The repartition topic links the two subtopologies.
    assert "node_word_2d_counts_2d_repartition_2d_sink --> topic_word_2d_counts_2d_repartition" in text
    assert "topic_word_2d_counts_2d_repartition --> node_word_2d_counts_2d_repartition_2d_source" in text
    assert "-.- store_word_2d_counts" in text
    assert text.count(" --> ") == 10  # 5 + 5 nodes and topics in a chain


def test_dot_is_a_digraph_with_clusters():
    text = to_dot(build().describe())
    assert text.startswith("digraph topology {\n") and text.endswith("}\n")
    assert "subgraph cluster_0 {" in text and "subgraph cluster_1 {" in text
    assert 'store_word_2d_counts [shape=cylinder, label="Store: word-counts"];' in text
    assert "topic_words -> node_KSTREAM_2d_SOURCE_2d_0000000000;" in text
    assert text.count("{") == text.count("}")


def test_an_unknown_format_is_refused():
    with pytest.raises(ValueError, match="use one of mermaid, dot"):
        diagram(build().describe(), "png")


def test_describe_prints_kafkas_text(capsys):
    assert main(["describe", f"{MODULE}:build"]) == 0
    assert capsys.readouterr().out == str(build().describe())


def test_describe_writes_a_diagram_by_extension_or_format(tmp_path, capsys):
    mmd, dot = tmp_path / "t.mmd", tmp_path / "t.dot"
    assert main(["describe", f"{MODULE}:build", "--diagram", str(mmd)]) == 0
    assert main(["describe", f"{MODULE}:build", "--diagram", str(dot)]) == 0
    assert mmd.read_text() == to_mermaid(build().describe())
    assert dot.read_text() == to_dot(build().describe())
    capsys.readouterr()
    assert main(["describe", f"{MODULE}:build", "--format", "dot"]) == 0
    assert capsys.readouterr().out == to_dot(build().describe())


def test_describe_of_a_bad_spec_exits_1_with_the_reason(capsys):
    assert main(["describe", f"{MODULE}:missing"]) == 1
    assert "Error: " in capsys.readouterr().err
