"""InitParameters: what ``KafkaStreams.init()`` may do when it finds the setup incomplete (KIP-698).

``init()`` creates every internal topic when none exists and refuses (``InternalTopicsAlreadySetupException``)
when all exist. When only some exist, data may have been lost with the missing ones, so by default it
raises ``MissingInternalTopicsException``; parameters with setup-if-incomplete enabled make it create
the missing topics instead.

Public as ``kstreams.InitParameters`` (and ``kstreams.client.InitParameters``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

__all__ = ["InitParameters"]


@dataclass(frozen=True, slots=True)
class InitParameters:
    """Immutable parameters of ``KafkaStreams.init()``; each setter returns a new instance, as in Kafka."""

    _setup_internal_topics_if_incomplete: bool = False

    @classmethod
    def init_parameters(cls) -> InitParameters:
        """The defaults: raise ``MissingInternalTopicsException`` if some internal topics are missing."""
        return cls()

    def enable_setup_internal_topics_if_incomplete(self) -> InitParameters:
        """Parameters that make init() create the missing internal topics of an incomplete setup."""
        return replace(self, _setup_internal_topics_if_incomplete=True)

    def disable_setup_internal_topics_if_incomplete(self) -> InitParameters:
        """Parameters that make init() raise when some but not all internal topics are missing."""
        return replace(self, _setup_internal_topics_if_incomplete=False)

    def setup_internal_topics_if_incomplete_enabled(self) -> bool:
        """Whether init() creates missing internal topics when the setup is incomplete."""
        return self._setup_internal_topics_if_incomplete

    def __repr__(self) -> str:
        return (
            f"InitParameters(setup_internal_topics_if_incomplete={self._setup_internal_topics_if_incomplete})"
        )
