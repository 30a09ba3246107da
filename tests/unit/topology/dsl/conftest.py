"""Fixtures of the DSL tests: ``drive``, a factory that runs a topology in the test driver or, in a
module marked ``on_cluster``, also on a KafkaStreams client over an EmbeddedCluster, and the hooks
that parametrise it and put the cluster runs in their tier. The clients' config, the list of
clients closed after a test and the wait are tests/conftest.py's (``client_config``, ``clients``,
``wait_until``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kstreams.cluster import EmbeddedCluster
from kstreams.testing import TopologyTestDriver
from tests.support.clients import STRING_DEFAULTS, client_settings
from tests.support.cluster_test_driver import ClusterTestDriver
from tests.support.waiting import wait_until

__all__: list[str] = []

# The fixtures of a test that runs on a cluster of its own (one that checks what only a cluster
# shows: several partitions, threads, a restart), not through ``drive``.
CLUSTER_FIXTURES = {"cluster", "embedded_cluster"}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """In a module marked ``on_cluster``, a test using ``drive`` runs twice: on the driver and on
    the cluster (see ``drive``), unless it is marked ``driver_only``. ``cluster_xfail`` makes its
    cluster run a strict xfail; ``cluster_store_cache`` keeps the store cache there (see
    ``drive``). Only the module's ``representative`` test runs on the cluster in the default tier
    (``pytest_collection_modifyitems``). Each of these markers but ``on_cluster`` takes a reason."""
    if "drive" not in metafunc.fixturenames or metafunc.definition.get_closest_marker("on_cluster") is None:
        return
    driver_only = metafunc.definition.get_closest_marker("driver_only")
    if driver_only is not None:
        _reason(driver_only)
        return
    xfail = metafunc.definition.get_closest_marker("cluster_xfail")
    marks = [] if xfail is None else [pytest.mark.xfail(strict=True, reason=_reason(xfail))]
    metafunc.parametrize("drive", ["driver", pytest.param("cluster", marks=marks)], indirect=True)


def _reason(marker: pytest.Mark) -> str:
    reason = marker.kwargs.get("reason") or (marker.args[0] if marker.args else "")
    if not reason:
        raise pytest.UsageError(f"@pytest.mark.{marker.name} needs a reason")
    return str(reason)


@pytest.hookimpl(tryfirst=True)  # before -m deselects the slow tier
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The cluster runs of an ``on_cluster`` module are in the slow tier, but for the first one of
    the test function the marker names as ``representative`` (its first on the embedded cluster,
    for a test over the ``cluster`` fixture). A cluster run is a test's run with ``drive`` on the
    cluster, or a run of a test that takes a cluster fixture (``CLUSTER_FIXTURES``): a test of the
    module that checks what only a cluster shows."""
    kept: set[str] = set()
    for item in items:
        marker = item.get_closest_marker("on_cluster")
        if marker is None:
            continue
        params = getattr(getattr(item, "callspec", None), "params", {})
        on_cluster = params.get("drive") == "cluster" or bool(
            CLUSTER_FIXTURES & set(getattr(item, "fixturenames", ()))
        )
        if not on_cluster:
            continue
        module = item.nodeid.split("::")[0]
        name = getattr(item, "originalname", item.name)
        embedded = params.get("cluster", "embedded") == "embedded"
        if name == marker.kwargs.get("representative") and embedded and module not in kept:
            kept.add(module)
        else:
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def drive(request: pytest.FixtureRequest) -> Iterator[Callable[..., Any]]:
    """``drive(topology, **config)``: a TopologyTestDriver with string default serdes, closed after
    the test. Parametrised with "cluster" (see ``pytest_generate_tests``): a ``ClusterTestDriver``
    instead, the same interface over a KafkaStreams client on an EmbeddedCluster, configured by
    ``tests.support.clients.client_settings``, with a short commit interval (``pipe_input`` waits for a
    commit) and no store cache unless the test gives a cache size or is marked
    ``cluster_store_cache``. The driver flushes the cache after each record, records it feeds to a
    repartition topic included; a client flushes it at commits, so whether the updates one record
    sends through a repartition topic are merged would depend on the commit's timing."""
    on_cluster = getattr(request, "param", "driver") == "cluster"
    drivers: list[Any] = []
    clusters: list[EmbeddedCluster] = []

    def make(topology: Any, **config: Any) -> Any:
        settings = {key.replace("_", "."): value for key, value in config.items()}
        if not on_cluster:
            driver: Any = TopologyTestDriver(topology, {**STRING_DEFAULTS, **settings})
        else:
            # A second driver of the test is a second application on a cluster of its own: on
            # the first one's cluster it would read the first one's input topics again.
            cluster = request.getfixturevalue("embedded_cluster")
            if drivers:
                cluster = EmbeddedCluster()
                clusters.append(cluster)
            app_id = f"{request.getfixturevalue('app_id')}-{len(drivers)}"
            state_dir = request.getfixturevalue("tmp_path") / app_id
            settings.setdefault("commit.interval.ms", 5)
            settings.setdefault("poll.ms", 5)  # the commit comes in the polling loop's next turn
            keeps_cache = request.node.get_closest_marker("cluster_store_cache")
            if keeps_cache is not None:
                _reason(keeps_cache)
            elif not ({"statestore.cache.max.bytes", "cache.max.bytes.buffering"} & settings.keys()):
                settings["statestore.cache.max.bytes"] = 0
            props = client_settings(cluster, app_id, state_dir, **settings)
            driver = ClusterTestDriver(topology, props, cluster, wait_until)
            request.getfixturevalue("clients").append(driver.streams)
        drivers.append(driver)
        return driver

    yield make
    for driver in drivers:
        driver.close()
    for cluster in clusters:
        cluster.close()
