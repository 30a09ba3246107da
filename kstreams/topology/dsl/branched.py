"""Branching a stream: ``split()`` -> ``BranchedKStream`` -> ``branch(...)`` ... ``default_branch()``.

Branch names follow Kafka: the splitter is ``KSTREAM-BRANCH-<n>`` (or the name given to
``split``), and each branch is the splitter name followed by the branch's own name
(``Branched.as_("a")``) or by its position (1, 2, ...; the default branch is 0). The returned
dict maps those names to the branch streams.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from kstreams.topology.dsl import naming
from kstreams.topology.dsl.parameters import _check_name
from kstreams.topology.dsl.processors.stateless import BranchSupplier, PassThroughSupplier

if TYPE_CHECKING:
    from kstreams.topology.dsl.kstream import KStream

__all__ = ["Branched", "BranchedKStream"]

logger = logging.getLogger(__name__)

K = TypeVar("K")
V = TypeVar("V")


@dataclass(frozen=True)
class Branched:
    """How one branch is named and what is done with it.

    ``Branched.with_function(fn)``: the dict holds ``fn(branch)`` (left out if it returns None);
    ``Branched.with_consumer(fn)``: ``fn(branch)`` is called and the branch is left out of the dict.
    """

    name: str | None = None
    function: Callable[[KStream[Any, Any]], Any] | None = None
    consumer: Callable[[KStream[Any, Any]], None] | None = None

    @staticmethod
    def as_(name: str) -> Branched:
        return Branched(name=_check_name(name, "Branched name"))

    @staticmethod
    def with_function(function: Callable[[KStream[Any, Any]], Any], name: str | None = None) -> Branched:
        return Branched(name=_check_name(name, "Branched name"), function=function)

    @staticmethod
    def with_consumer(consumer: Callable[[KStream[Any, Any]], None], name: str | None = None) -> Branched:
        return Branched(name=_check_name(name, "Branched name"), consumer=consumer)


class BranchedKStream(Generic[K, V]):
    """The branches of a split stream, added in order; each record takes the first that matches.

    The dict of branches holds ``KStream[K, V]`` values, or whatever a ``Branched.with_function``
    returned for its branch, hence its ``Any`` values."""

    def __init__(self, source: KStream[K, V], name: str | None) -> None:
        self._source = source
        builder = source._builder
        self._splitter = builder.name_or_generate(name, naming.BRANCH)
        self._predicates: list[Callable[[K, V], bool]] = []
        self._child_names: list[str] = []
        self._outputs: dict[str, Any] = {}
        self._done = False
        # The supplier shares the lists, so branches added below reach every processor it makes.
        builder.add_processor(
            self._splitter, BranchSupplier(self._predicates, self._child_names), source._name
        )

    def branch(
        self, predicate: Callable[[K, V], bool], branched: Branched | None = None
    ) -> BranchedKStream[K, V]:
        """Add a branch for records with ``predicate(key, value)`` true (and no earlier match)."""
        self._check_open()
        self._predicates.append(predicate)
        self._create(branched or Branched(), len(self._predicates))
        return self

    def default_branch(self, branched: Branched | None = None) -> dict[str, Any]:
        """Add the branch for every record no predicate matched, and return the branches."""
        self._check_open()
        self._create(branched or Branched(), 0)
        self._done = True
        return self._outputs

    def no_default_branch(self) -> dict[str, Any]:
        """Return the branches; records matching no predicate are dropped."""
        self._check_open()
        self._done = True
        return self._outputs

    # Kafka's spelling
    defaultBranch = default_branch
    noDefaultBranch = no_default_branch

    def _check_open(self) -> None:
        if self._done:
            raise ValueError(
                f"The split {self._splitter} is closed: default_branch() or no_default_branch() was "
                "already called; add branches before that."
            )

    def _create(self, branched: Branched, index: int) -> None:
        from kstreams.topology.dsl.kstream import KStream

        source = self._source
        child = self._splitter + (branched.name if branched.name is not None else str(index))
        if child in self._child_names:
            raise ValueError(
                f"Branch {child!r} of split {self._splitter} exists already: name branches uniquely."
            )
        self._child_names.append(child)
        # Kafka draws an index for each branch even though the branch keeps its derived name.
        source._builder.new_processor_name(child)
        source._builder.add_processor(child, PassThroughSupplier(), self._splitter)
        stream: KStream[K, V] = KStream(
            source._builder,
            child,
            source._key_serde,
            source._value_serde,
            source._repartition_required,
            source._source_nodes,
        )
        if branched.function is not None:
            result = branched.function(stream)
            if result is not None:
                self._outputs[child] = result
        elif branched.consumer is not None:
            branched.consumer(stream)
        else:
            self._outputs[child] = stream
