"""Operating tools behind the ``kstreams`` command: application reset, topology diagrams, the
application runner and the properties files they read. Each is callable from Python too."""

from __future__ import annotations

__all__: list[str] = []
