"""The operating subcommands of the ``kstreams`` command: ``reset``, ``describe`` and ``run``.

``kstreams.cli`` adds them to its parser with ``add_commands`` and hands a parsed command to
``run_command``. Each command's logic lives in its own module of ``kstreams.tools``; this one only
turns arguments into calls and errors into one ``Error: ...`` line on stderr with exit code 1
(2 for unusable arguments, as argparse exits).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

__all__ = ["COMMANDS", "add_commands", "run_command"]

logger = logging.getLogger(__name__)

COMMANDS = ("reset", "describe", "run")
_LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def add_commands(sub: Any) -> None:
    """Add the subcommands to ``sub`` (the parser's ``add_subparsers()``)."""
    _add_reset(sub)
    _add_describe(sub)
    _add_run(sub)


def run_command(args: argparse.Namespace) -> int | None:
    """Run a parsed subcommand of this module and return its exit code; None for other commands."""
    handlers = {"reset": _reset, "describe": _describe, "run": _run}
    handler = handlers.get(args.command)
    if handler is None:
        return None
    logging.basicConfig(level=args.log_level, format=_LOG_FORMAT)
    from kstreams.errors import StreamsException
    from kstreams.tools.app_loader import TopologyLoadError
    from kstreams.tools.application_reset import ResetError
    from kstreams.tools.properties import PropertiesError

    try:
        return handler(args)
    except (ResetError, TopologyLoadError, PropertiesError, StreamsException, OSError) as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:
        from kstreams.cluster.port import ClusterError

        if isinstance(exc, ClusterError):
            print(f"Error: {exc}", file=sys.stderr)
            return 1
        raise


# -- reset ---------------------------------------------------------------------------------------


def _add_reset(sub: Any) -> None:
    reset = sub.add_parser(
        "reset",
        help="reset an application so it reprocesses its input (Kafka's kafka-streams-application-reset)",
        description=(
            "Set the committed offsets of the application's input topics (default: to the earliest) and "
            "delete its internal topics (<application.id>-...-changelog/-repartition). Every instance must "
            "be stopped. Local state is not touched: call KafkaStreams.clean_up() before restarting."
        ),
    )
    reset.add_argument("--application-id", required=True, help="the application's application.id")
    reset.add_argument(
        "--bootstrap-server",
        "--bootstrap-servers",
        dest="bootstrap_server",
        help="the Kafka cluster, host:port[,host:port]; required",
    )
    reset.add_argument(
        "--input-topics", default="", help="comma-separated input topics whose offsets to reset"
    )
    reset.add_argument(
        "--internal-topics",
        default=None,
        help="comma-separated internal topics to delete (default: every internal topic of the application)",
    )
    reset.add_argument("--config-file", help="properties file of client settings (security, timeouts)")
    reset.add_argument("--dry-run", action="store_true", help="print what would be done; change nothing")
    where = reset.add_mutually_exclusive_group()
    where.add_argument("--to-earliest", action="store_true", help="reset to the earliest offsets (default)")
    where.add_argument("--to-latest", action="store_true", help="reset to the latest offsets")
    where.add_argument("--to-offset", type=int, metavar="N", help="reset to offset N")
    where.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss", help="reset to a date-time")
    where.add_argument("--by-duration", metavar="PnDTnHnMnS", help="reset to a duration back from now")
    where.add_argument("--shift-by", type=int, metavar="N", help="shift the committed offsets by N (+/-)")
    where.add_argument(
        "--from-file", metavar="CSV", help="reset to the topic,partition,offset lines of a file"
    )
    reset.add_argument("--log-level", default="WARNING")


def _reset(args: argparse.Namespace) -> int:
    from kstreams.cluster import KafkaCluster
    from kstreams.tools.application_reset import ResetError, ResetPosition, reset_application
    from kstreams.tools.properties import load_properties

    if not args.bootstrap_server:
        raise ResetError(
            "--bootstrap-server is required: the reset tool works on a Kafka cluster (host:port). The "
            "embedded cluster lives inside one process; reset it from Python with "
            "kstreams.tools.application_reset.reset_application(cluster, ...)"
        )
    position = ResetPosition.earliest()
    if args.to_latest:
        position = ResetPosition.latest()
    elif args.to_offset is not None:
        position = ResetPosition.to_offset(args.to_offset)
    elif args.to_datetime is not None:
        position = ResetPosition.to_datetime(args.to_datetime)
    elif args.by_duration is not None:
        position = ResetPosition.by_duration(args.by_duration)
    elif args.shift_by is not None:
        position = ResetPosition.shift_by(args.shift_by)
    elif args.from_file is not None:
        position = ResetPosition.from_file(args.from_file)
    config = load_properties(args.config_file) if args.config_file else {}
    internal = _topics(args.internal_topics) if args.internal_topics is not None else None
    with KafkaCluster(args.bootstrap_server, config) as cluster:
        plan = reset_application(
            cluster, args.application_id, _topics(args.input_topics), position, internal, dry_run=args.dry_run
        )
    print(plan.describe())
    return 0


def _topics(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


# -- describe ------------------------------------------------------------------------------------


def _add_describe(sub: Any) -> None:
    describe = sub.add_parser(
        "describe",
        help="print a topology's description, and optionally write a Mermaid or Graphviz diagram",
        description=(
            "module:attr names a Topology, a StreamsBuilder, or a function without arguments returning "
            "one (e.g. myapp.topology:build)."
        ),
    )
    describe.add_argument("topology", metavar="module:attr")
    describe.add_argument("--diagram", metavar="FILE", help="write a diagram to FILE ('-': standard output)")
    describe.add_argument(
        "--format",
        choices=("mermaid", "dot"),
        default=None,
        help="diagram format (default: from the file's extension: .dot/.gv is dot, else mermaid)",
    )
    describe.add_argument("--log-level", default="WARNING")


def _describe(args: argparse.Namespace) -> int:
    from kstreams.tools.app_loader import load_topology
    from kstreams.tools.topology_diagram import diagram

    topology = load_topology(args.topology)
    description = topology.describe()
    fmt = args.format
    if fmt is None:
        fmt = "dot" if args.diagram and Path(args.diagram).suffix in (".dot", ".gv") else "mermaid"
    if args.diagram is None:
        if args.format is not None:
            print(diagram(description, fmt), end="")
        else:
            print(description, end="")
        return 0
    text = diagram(description, fmt)
    if args.diagram == "-":
        print(text, end="")
        return 0
    print(description, end="")
    Path(args.diagram).write_text(text, encoding="utf-8")
    print(f"Wrote a {fmt} diagram to {args.diagram}", file=sys.stderr)
    return 0


# -- run -----------------------------------------------------------------------------------------


def _add_run(sub: Any) -> None:
    run = sub.add_parser(
        "run",
        help="run an application from a properties file until SIGINT/SIGTERM",
        description=(
            "Runs the topology module:attr names with the settings of a Java-style properties file. Without "
            "bootstrap.servers it runs on an embedded in-process cluster that nothing outside this process "
            "can reach: useful only for demos."
        ),
    )
    run.add_argument("topology", metavar="module:attr")
    run.add_argument("--config", required=True, metavar="FILE", help="properties file (application.id=...)")
    run.add_argument(
        "--bootstrap-server",
        "--bootstrap-servers",
        dest="bootstrap_server",
        help="overrides bootstrap.servers",
    )
    run.add_argument("--log-level", default="INFO")


def _run(args: argparse.Namespace) -> int:
    from kstreams.cluster import EmbeddedCluster
    from kstreams.config import StreamsConfig
    from kstreams.tools.app_loader import load_topology
    from kstreams.tools.app_runner import run_application
    from kstreams.tools.properties import load_properties

    props: dict[str, Any] = dict(load_properties(args.config))
    if args.bootstrap_server:
        props["bootstrap.servers"] = args.bootstrap_server
    config = StreamsConfig(props)  # validated before anything starts
    topology = load_topology(args.topology)
    cluster = None
    if not config["bootstrap.servers"]:
        logger.warning(
            "No bootstrap.servers: running on an embedded in-process cluster, which no other process can "
            "produce to or read from (useful only for demos). Set bootstrap.servers in %s or pass "
            "--bootstrap-server to run on Kafka.",
            args.config,
        )
        cluster = EmbeddedCluster()
        _create_source_topics(cluster, topology)
    return run_application(topology, config, cluster=cluster)


def _create_source_topics(cluster: Any, topology: Any) -> None:
    """On a fresh embedded cluster no topic exists: create the topology's input topics (one
    partition each) so the application starts instead of failing on missing sources."""
    from kstreams.tools.app_runner import source_topics

    existing = cluster.topics()
    for topic in source_topics(topology):
        if topic not in existing:
            cluster.create_topic(topic, 1)
            logger.info("Created input topic %s on the embedded cluster", topic)
