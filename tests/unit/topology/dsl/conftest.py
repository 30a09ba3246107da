"""Fixtures of the DSL tests: a factory that runs a topology in the test driver."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kstreams.testing import TopologyTestDriver

STRING_DEFAULTS = {"default.key.serde": "string", "default.value.serde": "string"}


@pytest.fixture
def drive() -> Iterator[Callable[..., TopologyTestDriver]]:
    """``drive(topology, **config)``: a TopologyTestDriver with string default serdes, closed after
    the test."""
    drivers: list[TopologyTestDriver] = []

    def make(topology: Any, **config: Any) -> TopologyTestDriver:
        props = dict(STRING_DEFAULTS)
        props.update({key.replace("_", "."): value for key, value in config.items()})
        driver = TopologyTestDriver(topology, props)
        drivers.append(driver)
        return driver

    yield make
    for driver in drivers:
        driver.close()
