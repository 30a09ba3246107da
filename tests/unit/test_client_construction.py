"""KafkaStreams construction: a state.dir that cannot be created or written fails the constructor,
naming the directory and the OS error, instead of the first stateful task after ``start()``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kstreams.client import KafkaStreams
from kstreams.cluster import EmbeddedCluster
from kstreams.errors import ConfigException
from kstreams.processor import Processor, Record
from kstreams.state import Stores
from kstreams.topology.topology import Topology

APP = "construction"


@pytest.fixture
def cluster(embedded_cluster: EmbeddedCluster) -> EmbeddedCluster:
    return embedded_cluster


class Ignore(Processor):
    def process(self, record: Record) -> None:
        pass


def counting_topology() -> Topology:
    topology = Topology()
    topology.add_source("src", "in")
    topology.add_processor("ignore", Ignore, "src")
    supplier = Stores.persistent_key_value_store("counts")
    topology.add_state_store(Stores.key_value_store_builder(supplier, None, None), "ignore")
    return topology


def new_client(cluster: EmbeddedCluster, state_dir: Path) -> KafkaStreams:
    return KafkaStreams(
        counting_topology(), {"application.id": APP, "state.dir": str(state_dir)}, cluster=cluster
    )


def test_a_state_dir_that_cannot_be_created_fails_construction_naming_it(
    cluster: EmbeddedCluster, tmp_path: Path
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    state_dir = blocker / "state"
    with pytest.raises(ConfigException) as info:
        new_client(cluster, state_dir)
    text = str(info.value)
    assert "'state.dir'" in text and str(state_dir) in text
    assert "Not a directory" in text  # the OS error
    assert "Set state.dir to a directory this process can create and write" in text


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_a_state_dir_that_cannot_be_written_fails_construction_naming_it(
    cluster: EmbeddedCluster, tmp_path: Path
) -> None:
    state_dir = tmp_path / "read-only"
    (state_dir / APP).mkdir(parents=True)
    state_dir.chmod(0o555)
    (state_dir / APP).chmod(0o555)
    try:
        with pytest.raises(ConfigException) as info:
            new_client(cluster, state_dir)
    finally:
        (state_dir / APP).chmod(0o755)
        state_dir.chmod(0o755)
    text = str(info.value)
    assert "'state.dir'" in text and str(state_dir / APP) in text


def test_a_usable_state_dir_is_created_and_keeps_the_process_id_across_clients(
    cluster: EmbeddedCluster, tmp_path: Path
) -> None:
    state_dir = tmp_path / "not-yet" / "there"
    first = new_client(cluster, state_dir)
    assert (state_dir / APP).is_dir()
    # While the first client lives, a second one on the same directory gets a fresh id.
    second = new_client(cluster, state_dir)
    assert second.process_id != first.process_id
    assert first.close(timeout=10) and second.close(timeout=10)
    assert new_client(cluster, state_dir).process_id == first.process_id


def test_a_handler_that_names_no_python_class_fails_the_constructor(cluster: EmbeddedCluster) -> None:
    # Before, the client was built and its polling thread died later in the background.
    config = {
        "application.id": APP,
        "processing.exception.handler": "com.example.streams.MyProcessingExceptionHandler",
    }
    with pytest.raises(ConfigException, match=r"processing\.exception\.handler=.* names no importable class"):
        KafkaStreams(counting_topology(), config, cluster=cluster)
