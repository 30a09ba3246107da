"""Load an application's topology from ``module:attr``, as ``kstreams describe`` and ``kstreams run``
name it.

``attr`` may be a dotted path inside the module (``pkg.app:App.topology``) and may name a
``Topology``, a ``StreamsBuilder`` (built with ``build()``), or a function taking no arguments
that returns either. The current directory is put first on ``sys.path``, as ``python -m`` does, so
a module beside the user is found.

Guarantee: every failure is a ``TopologyLoadError`` that says what was looked up, what was found
and how to fix it; an ImportError raised *inside* the user's module keeps its traceback as cause.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import os
import sys
from typing import Any

from kstreams.topology.dsl.builder import StreamsBuilder
from kstreams.topology.topology import Topology

__all__ = ["TopologyLoadError", "load_topology"]

logger = logging.getLogger(__name__)


class TopologyLoadError(ValueError):
    """``module:attr`` names no topology: the message says why and what is expected."""


def load_topology(spec: str) -> Topology:
    """The Topology that ``spec`` (``module:attr``) names."""
    module_name, sep, attr_path = spec.partition(":")
    if not sep or not module_name or not attr_path:
        raise TopologyLoadError(
            f"{spec!r} does not name a topology: write module:attr, e.g. myapp.topology:build "
            "(attr is a Topology, a StreamsBuilder, or a function without arguments returning one)"
        )
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module_name.startswith(exc.name):
            raise TopologyLoadError(
                f"Cannot import module {module_name!r} of {spec!r}: no module named {exc.name!r}. Run from "
                "the directory that holds it, or install its package."
            ) from exc
        raise TopologyLoadError(f"Importing module {module_name!r} of {spec!r} failed: {exc}") from exc
    except Exception as exc:
        raise TopologyLoadError(f"Importing module {module_name!r} of {spec!r} failed: {exc!r}") from exc
    target: Any = module
    for part in attr_path.split("."):
        if not hasattr(target, part):
            public = sorted(n for n in dir(target) if not n.startswith("_"))[:20]
            raise TopologyLoadError(
                f"{spec!r}: {type(target).__name__} {getattr(target, '__name__', target)!r} has no attribute "
                f"{part!r}; it has {', '.join(public) or 'no public names'}"
            )
        target = getattr(target, part)
    if callable(target) and not isinstance(target, Topology | StreamsBuilder | type):
        named = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        try:
            required = [
                p
                for p in inspect.signature(target).parameters.values()
                if p.default is p.empty and p.kind in (*named, inspect.Parameter.KEYWORD_ONLY)
            ]
        except (TypeError, ValueError):
            required = []
        if required:
            raise TopologyLoadError(
                f"{spec!r} is a function that needs arguments ({', '.join(p.name for p in required)}): "
                "name a function without arguments that returns a Topology or a StreamsBuilder"
            )
        target = target()
    if isinstance(target, StreamsBuilder):
        target = target.build()
    if not isinstance(target, Topology):
        raise TopologyLoadError(
            f"{spec!r} is a {type(target).__name__}, not a Topology: name a Topology, a StreamsBuilder, or "
            "a function without arguments returning one"
        )
    return target
