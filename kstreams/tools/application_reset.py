"""The application reset tool: make a stopped application reprocess its input (``kstreams reset``).

It does what Kafka's ``kafka-streams-application-reset`` does, on any ``Cluster`` (so tests run it
on the EmbeddedCluster and on a real broker alike):

1. Refuse to touch an application that runs: the consumer group ``<application.id>`` must have no
   active members (``ApplicationActiveError``), checked before anything else, dry run included.
2. Set the group's committed offsets of every partition of the input topics to the chosen
   position (``ResetPosition``: earliest, the default; latest; an offset; a date-time; a duration
   back from now; a shift from the committed offset; or a per-partition plan from a CSV file).
   Positions outside a partition's log are clamped to its start or end, as Kafka does.
3. Delete the application's internal topics: ``<application.id>-...-changelog``,
   ``<application.id>-...-repartition`` and a foreign-key join's subscription registration and
   response topics (or the subset named; Kafka's ``StreamsResetter`` takes the same names), and
   wait until the cluster no longer lists them, so a restarted application creates them afresh.

Like Kafka's tool, it leaves output topics alone, skips (and reports) input topics that do not
exist, and does not touch local state: call ``KafkaStreams.clean_up()`` before the next start.
With ``dry_run`` it computes and reports the same plan and changes nothing.
"""

from __future__ import annotations

import csv
import logging
import re
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from kstreams.cluster.port import Admin, Cluster, ClusterError, TopicPartition

__all__ = [
    "ApplicationActiveError",
    "ResetError",
    "ResetPlan",
    "ResetPosition",
    "is_internal_topic",
    "parse_datetime",
    "parse_duration",
    "plan_reset",
    "read_offsets_file",
    "reset_application",
]

logger = logging.getLogger(__name__)

INTERNAL_TOPIC_SUFFIXES = (
    "-changelog",
    "-repartition",
    "-subscription-registration-topic",  # a named foreign-key join's
    "-subscription-response-topic",
)
# An unnamed foreign-key join's topics (KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000012-topic).
_GENERATED_FK_TOPIC = re.compile(r".+-KTABLE-FK-JOIN-SUBSCRIPTION-(?:REGISTRATION|RESPONSE)-\d+-topic")
# How long to wait for deleted topics to leave the cluster's listing (Kafka deletes asynchronously).
DELETE_WAIT_SECONDS = 60.0
_DURATION = re.compile(
    r"(?P<sign>[-+]?)P(?:(?P<days>\d+)D)?(?:T(?:(?P<hours>\d+)H)?(?:(?P<minutes>\d+)M)?"
    r"(?:(?P<seconds>\d+(?:\.\d+)?)S)?)?",
    re.IGNORECASE,
)


class ResetError(ValueError):
    """The reset cannot be done as asked: the message says what was wrong and how to fix it."""


class ApplicationActiveError(ResetError):
    """The application's consumer group still has active members."""


@dataclass(frozen=True)
class ResetPosition:
    """Where the input topics' offsets go. Build one with the class methods."""

    kind: str  # earliest | latest | offset | timestamp | shift | plan
    value: int = 0  # the offset, the epoch-ms timestamp, or the shift
    plan: Mapping[TopicPartition, int] = field(default_factory=dict)  # kind "plan" only

    @classmethod
    def earliest(cls) -> ResetPosition:
        return cls("earliest")

    @classmethod
    def latest(cls) -> ResetPosition:
        return cls("latest")

    @classmethod
    def to_offset(cls, offset: int) -> ResetPosition:
        if offset < 0:
            raise ResetError(f"--to-offset {offset}: an offset is 0 or more")
        return cls("offset", offset)

    @classmethod
    def to_timestamp(cls, epoch_ms: int) -> ResetPosition:
        return cls("timestamp", epoch_ms)

    @classmethod
    def to_datetime(cls, text: str) -> ResetPosition:
        return cls("timestamp", parse_datetime(text))

    @classmethod
    def by_duration(cls, text: str, now_ms: int | None = None) -> ResetPosition:
        now = int(time.time() * 1000) if now_ms is None else now_ms
        return cls("timestamp", now - int(parse_duration(text).total_seconds() * 1000))

    @classmethod
    def shift_by(cls, shift: int) -> ResetPosition:
        return cls("shift", shift)

    @classmethod
    def from_plan(cls, plan: Mapping[TopicPartition, int]) -> ResetPosition:
        return cls("plan", plan=dict(plan))

    @classmethod
    def from_file(cls, path: str | Path) -> ResetPosition:
        return cls.from_plan(read_offsets_file(path))

    def describe(self) -> str:
        if self.kind in ("earliest", "latest"):
            return f"the {self.kind} offsets"
        if self.kind == "offset":
            return f"offset {self.value}"
        if self.kind == "timestamp":
            when = datetime.fromtimestamp(self.value / 1000).astimezone().isoformat(timespec="milliseconds")
            return f"the first offsets at or after {when}"
        if self.kind == "shift":
            return f"the committed offsets shifted by {self.value:+d}"
        return "the offsets of the reset plan file"


@dataclass
class ResetPlan:
    """What a reset does (or, for a dry run, would do)."""

    application_id: str
    position: ResetPosition
    input_topics: list[str]
    missing_input_topics: list[str]
    offsets: dict[TopicPartition, int]  # the new committed offset of each input partition
    previous: dict[TopicPartition, int]  # committed offsets before the reset (absent: none)
    clamped: dict[TopicPartition, str]  # why an offset was moved into the log's range
    internal_topics: list[str]
    dry_run: bool = False

    def describe(self) -> str:
        """The plan as the command prints it."""
        mode = " (dry run: nothing is changed)" if self.dry_run else ""
        lines = [f"Reset of application {self.application_id!r}{mode}"]
        if self.missing_input_topics:
            lines.append(f"Input topics not found, skipped: {', '.join(self.missing_input_topics)}")
        if self.offsets:
            lines.append(
                f"Committed offsets of group {self.application_id!r} for input topics "
                f"{', '.join(self.input_topics)} go to {self.position.describe()}:"
            )
            for tp, offset in sorted(self.offsets.items()):
                before = self.previous.get(tp)
                note = f"  ({self.clamped[tp]})" if tp in self.clamped else ""
                was = "none" if before is None else str(before)
                lines.append(f"  {tp.topic} partition {tp.partition}: {was} -> {offset}{note}")
        else:
            lines.append("No input topic offsets to reset (no --input-topics given, or none exists).")
        if self.internal_topics:
            lines.append("Internal topics to delete:")
            lines.extend(f"  {name}" for name in self.internal_topics)
        else:
            lines.append("No internal topics to delete.")
        if not self.dry_run:
            lines.append(
                "Done. Before restarting, delete each instance's local state: KafkaStreams.clean_up() "
                f"(or remove <state.dir>/{self.application_id})."
            )
        return "\n".join(lines)


def is_internal_topic(topic: str, application_id: str) -> bool:
    """Whether ``topic`` is one of the application's changelog, repartition or foreign-key join topics."""
    return topic.startswith(application_id + "-") and (
        topic.endswith(INTERNAL_TOPIC_SUFFIXES) or _GENERATED_FK_TOPIC.fullmatch(topic) is not None
    )


def plan_reset(
    cluster: Cluster,
    application_id: str,
    input_topics: Sequence[str] = (),
    position: ResetPosition | None = None,
    internal_topics: Sequence[str] | None = None,
) -> ResetPlan:
    """Check the application is stopped and compute the reset, changing nothing.

    ``internal_topics`` None deletes every internal topic of the application; a list deletes
    those (each must be one of them). Raises ApplicationActiveError or ResetError.
    """
    position = position or ResetPosition.earliest()
    if not application_id:
        raise ResetError(
            "The application id is empty: pass --application-id, the application's application.id"
        )
    admin = cluster.admin()
    members = admin.group_members(application_id)
    if members:
        raise ApplicationActiveError(
            f"Application {application_id!r} is still running: its consumer group has {len(members)} active "
            f"member(s) ({', '.join(members)}). Stop every instance (KafkaStreams.close()), wait until they "
            "left the group, and reset again."
        )
    existing = admin.describe_topics(None)
    wanted = list(dict.fromkeys(t for t in input_topics if t))
    present = [t for t in wanted if t in existing]
    missing = [t for t in wanted if t not in existing]
    for topic in missing:
        logger.warning("Input topic %s does not exist; skipping it", topic)
    partitions = [TopicPartition(t, p) for t in present for p in range(existing[t].partitions)]
    previous = admin.committed_offsets(application_id, partitions) if partitions else {}
    offsets, clamped = _target_offsets(admin, partitions, previous, position)
    all_internal = sorted(t for t in existing if is_internal_topic(t, application_id))
    if internal_topics is None:
        to_delete = all_internal
    else:
        unknown = [t for t in internal_topics if t not in all_internal]
        if unknown:
            raise ResetError(
                f"--internal-topics names {', '.join(unknown)}, which are not internal topics of application "
                f"{application_id!r} on this cluster; its internal topics are: "
                f"{', '.join(all_internal) or 'none'}"
            )
        to_delete = sorted(set(internal_topics))
    return ResetPlan(application_id, position, present, missing, offsets, previous, clamped, to_delete)


def reset_application(
    cluster: Cluster,
    application_id: str,
    input_topics: Sequence[str] = (),
    position: ResetPosition | None = None,
    internal_topics: Sequence[str] | None = None,
    dry_run: bool = False,
    delete_timeout: float = DELETE_WAIT_SECONDS,
) -> ResetPlan:
    """Reset the application (see the module docstring) and return what was done; with
    ``dry_run`` only the plan. Raises ApplicationActiveError, ResetError or ClusterError."""
    plan = plan_reset(cluster, application_id, input_topics, position, internal_topics)
    plan.dry_run = dry_run
    if dry_run:
        return plan
    admin = cluster.admin()
    if plan.offsets:
        admin.alter_committed_offsets(application_id, plan.offsets)
        logger.info("Reset the committed offsets of group %s for %s", application_id, plan.input_topics)
    if plan.internal_topics:
        admin.delete_topics(plan.internal_topics)
        _wait_deleted(admin, plan.internal_topics, delete_timeout)
        logger.info("Deleted the internal topics of %s: %s", application_id, plan.internal_topics)
    return plan


def parse_duration(text: str) -> timedelta:
    """An ISO-8601 duration as Java's ``Duration.parse`` reads the common forms: ``PnDTnHnMn.nS``,
    e.g. ``PT15M``, ``P1DT12H``, ``PT0.5S``. ResetError otherwise."""
    match = _DURATION.fullmatch(text.strip())
    if match is None or not any(match.group(g) for g in ("days", "hours", "minutes", "seconds")):
        raise ResetError(
            f"--by-duration {text!r} is not an ISO-8601 duration: write PnDTnHnMn.nS, "
            "e.g. PT15M (15 minutes) or P1DT12H (a day and a half)"
        )
    duration = timedelta(
        days=int(match.group("days") or 0),
        hours=int(match.group("hours") or 0),
        minutes=int(match.group("minutes") or 0),
        seconds=float(match.group("seconds") or 0),
    )
    return -duration if match.group("sign") == "-" else duration


def parse_datetime(text: str) -> int:
    """Epoch milliseconds of ``YYYY-MM-DDTHH:mm:SS[.sss][zone]`` (zone: ``Z`` or ``+HH:MM``; without
    one, the local time zone, as Kafka's tools read it). ResetError otherwise."""
    try:
        parsed = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ResetError(
            f"--to-datetime {text!r} is not a date-time: write YYYY-MM-DDTHH:mm:SS.sss, optionally "
            "with a zone (Z or +01:00), e.g. 2024-05-01T12:00:00.000Z"
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.astimezone()  # a naive time is local time
    return int(parsed.timestamp() * 1000)


def read_offsets_file(path: str | Path) -> dict[TopicPartition, int]:
    """A reset plan file as Kafka's tools write it: one ``topic,partition,offset`` line per
    partition (blank lines ignored). ResetError naming the line otherwise."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ResetError(f"Cannot read the reset plan file {path}: {exc.strerror or exc}") from exc
    plan: dict[TopicPartition, int] = {}
    for number, row in enumerate(csv.reader(text.splitlines()), start=1):
        if not row or not "".join(row).strip():
            continue
        try:
            topic, partition, offset = (cell.strip() for cell in row)
            tp, value = TopicPartition(topic, int(partition)), int(offset)
        except ValueError:
            raise ResetError(
                f"{path}, line {number}: {','.join(row)!r} is not topic,partition,offset (e.g. orders,0,42)"
            ) from None
        if not topic or tp.partition < 0 or value < 0:
            raise ResetError(f"{path}, line {number}: topic, partition and offset must be given, 0 or more")
        plan[tp] = value
    return plan


def _target_offsets(
    admin: Admin,
    partitions: list[TopicPartition],
    previous: Mapping[TopicPartition, int],
    position: ResetPosition,
) -> tuple[dict[TopicPartition, int], dict[TopicPartition, str]]:
    if not partitions:
        if position.kind == "plan" and position.plan:
            raise ResetError(
                "The reset plan file names partitions, but none of its topics is an existing input topic: "
                "pass them with --input-topics"
            )
        return {}, {}
    bounds = admin.list_offsets(partitions)
    wanted: dict[TopicPartition, int]
    if position.kind == "earliest":
        wanted = {tp: bounds[tp][0] for tp in partitions}
    elif position.kind == "latest":
        wanted = {tp: bounds[tp][1] for tp in partitions}
    elif position.kind == "offset":
        wanted = {tp: position.value for tp in partitions}
    elif position.kind == "timestamp":
        wanted = admin.offsets_for_times({tp: position.value for tp in partitions})
    elif position.kind == "shift":
        # Without a committed offset the application would start at the log start (Kafka Streams'
        # auto.offset.reset is earliest), so the shift counts from there.
        wanted = {tp: previous.get(tp, bounds[tp][0]) + position.value for tp in partitions}
    elif position.kind == "plan":
        unknown = sorted(str(tp) for tp in position.plan if tp not in bounds)
        if unknown:
            raise ResetError(
                f"The reset plan file names {', '.join(unknown)}, which are not partitions of the input "
                f"topics {sorted({tp.topic for tp in partitions})}: pass their topics with --input-topics, "
                "or fix the file"
            )
        wanted = {tp: position.plan[tp] for tp in partitions if tp in position.plan}
    else:
        raise ResetError(f"Unknown reset position {position.kind!r}")
    offsets: dict[TopicPartition, int] = {}
    clamped: dict[TopicPartition, str] = {}
    for tp, offset in wanted.items():
        start, end = bounds[tp]
        if offset < start:
            clamped[tp] = f"{offset} is before the log start {start}"
            offset = start
        elif offset > end:
            clamped[tp] = f"{offset} is past the log end {end}"
            offset = end
        offsets[tp] = offset
    return offsets, clamped


def _wait_deleted(admin: Admin, topics: Sequence[str], timeout: float) -> None:
    """Wait until the cluster lists none of ``topics`` (Kafka deletes them asynchronously)."""
    deadline = time.monotonic() + timeout
    pause = threading.Event()  # never set: a wait with a timeout between listings
    while True:
        left = sorted(set(topics) & set(admin.describe_topics(list(topics))))
        if not left:
            return
        if time.monotonic() > deadline:
            raise ClusterError(
                f"The internal topics {', '.join(left)} were deleted but are still listed after {timeout}s; "
                "wait until the cluster no longer lists them before restarting the application",
                retriable=True,
            )
        pause.wait(0.1)
