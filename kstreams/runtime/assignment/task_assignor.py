"""High-availability task assignment (KIP-441): which client runs each task, and where replicas go.

``assign_tasks`` is a pure function of what the clients reported. Every client of the application may
run it on the same reports and gets the same answer: clients and tasks are always visited in sorted
order and every tie ends at a process id or task id, so neither input order nor dict order matters.

Rules
-----
1. Every task, stateful or stateless, gets exactly one active client.
2. A client is *caught up* on a stateful task if it owned the task's active last time (its lag counts
   as 0) or it reported a lag <= ``acceptable_recovery_lag``. A stateful task missing from a client's
   ``lags`` has no state there: its lag is infinite.
3. Balance: a client's share of ``n`` tasks is ``n * threads / total threads``; a balanced client holds
   ``floor`` or ``ceil`` of its share. The stateful tasks are balanced first, into a *desired* owner
   each; the stateless tasks then fill every client towards its share of all tasks. (As in Kafka, too
   few stateless tasks may not even out the stateful rounding: a client's total can then miss those
   bounds, by one task in the randomized tests; its stateful count never does.) Which clients take a
   ``ceil`` is left to stickiness: a task stays with its previous owner unless the bounds force it
   away; a task with no previous owner starts on the client with the least lag on it (a stateless one:
   the least loaded). When a task must move, the receiver prefers tasks it is caught up on, then those
   with the least lag on it.
4. State: a stateful task runs where it is desired if that client is caught up. If not, but another
   client is, it runs there (its previous owner, else the least loaded caught-up client) and the desired
   client gets a *warm-up* replica. If no client is caught up, it runs on the client with the least
   lag (desired client first on a tie, then process id) and the desired client, if different, gets a
   warm-up. At most ``max_warmup_replicas`` warm-ups exist, given by task id order; the other moves
   wait for a later round.
5. Standbys: with the clients sorted by process id, the ``k`` standbys of a task active on client
   ``i`` go to clients ``i+1 .. i+k`` (mod n), ``k = min(num_standby_replicas, n - 1)`` (the rule
   kstreams placed standbys by before it had this assignor). A warm-up the desired client would
   get where that rule already puts a standby is not added: the standby serves as the warm-up, is
   listed under ``standby`` and uses none of the warm-up budget.
6. ``probing_rebalance_needed`` says a task runs away from its desired client while a replica warms up
   there (a warm-up, or a standby serving as one). Once the replica reports a lag within
   ``acceptable_recovery_lag``, rule 4 moves the task, so repeated rounds converge to the balanced
   assignment.

Differences from Kafka's ``HighAvailabilityTaskAssignor``
---------------------------------------------------------
- Balance is a greedy move loop, not Kafka's priority queues; there is no rack awareness and there
  are no client tags.
- Standbys follow the ring rule above, not Kafka's least-loaded placement; they ignore lags.
- With no caught-up client Kafka leaves the task on its desired client; here the least-lag client
  runs it and the desired client warms up.
- Warm-ups are granted in task id order, not by how few caught-up clients a task has.
- ``max_warmup_replicas`` may be 0 (Kafka requires 1 or more): a stateful task then never moves to a
  client that is not caught up on it (unless no client is), and no probing rebalance is asked for.
- The reported ``standby`` sets are not used: ``lags`` carries what a client holds.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from kstreams.processor import TaskId

__all__ = ["AssignmentResult", "ClientAssignment", "ClientReport", "assign_tasks"]

_NO_STATE = math.inf  # the lag of a client that holds no state for a task: it restores from scratch


@dataclass(frozen=True)
class ClientReport:
    """What one client (one KafkaStreams instance, identified by its process id) reported."""

    process_id: str
    threads: int  # num.stream.threads, >= 1: the client's capacity
    active: frozenset[TaskId] = frozenset()  # its active tasks in the previous assignment
    standby: frozenset[TaskId] = frozenset()  # the standby and warm-up replicas it holds now
    # Changelog lag in records (0 = caught up) of each stateful task whose state this client holds on
    # disk or open. A stateful task absent from it has no state here.
    lags: Mapping[TaskId, int] = field(default_factory=dict)


@dataclass(frozen=True)
class ClientAssignment:
    """One client's share: its active tasks and the replicas it must keep (none of them active here)."""

    active: frozenset[TaskId]
    standby: frozenset[TaskId]  # standbys placed by the ring rule (rule 5)
    warmup: frozenset[TaskId]  # replicas that exist to move the task here later (rule 4)


@dataclass(frozen=True)
class AssignmentResult:
    """The assignment of every task, with every client of the input present in ``clients``."""

    clients: dict[str, ClientAssignment]
    probing_rebalance_needed: bool  # a replica warms up for a task that should move (rule 6)
    moved: frozenset[TaskId]  # active tasks whose previous owner lost them (new tasks not counted)


def assign_tasks(
    clients: Mapping[str, ClientReport],
    stateful: Collection[TaskId],
    stateless: Collection[TaskId],
    *,
    num_standby_replicas: int = 0,
    max_warmup_replicas: int = 2,
    acceptable_recovery_lag: int = 10_000,
) -> AssignmentResult:
    """Assign every task of ``stateful`` and ``stateless`` to the clients, by the module's rules.

    Guaranteed: each task has exactly one active client; no client holds a replica (standby or warm-up)
    of a task it runs; at most ``max_warmup_replicas`` warm-ups; the same result for the same input in
    any order. Raises ValueError for invalid input (no clients, a client without threads, a task both
    stateful and stateless, a negative setting, a key that is not its report's process id).
    """
    stateful_ids = sorted(set(stateful))
    stateless_ids = sorted(set(stateless))
    settings = {
        "num_standby_replicas": num_standby_replicas,
        "max_warmup_replicas": max_warmup_replicas,
        "acceptable_recovery_lag": acceptable_recovery_lag,
    }
    _validate(clients, stateful_ids, stateless_ids, settings)
    ids = sorted(clients)
    threads = {c: clients[c].threads for c in ids}
    previous = _previous_owners(clients, ids)

    def lag(task: TaskId, client: str) -> float:
        if previous.get(task) == client:
            return 0  # it ran the task until now: its stores are current
        return clients[client].lags.get(task, _NO_STATE)

    def caught_up(task: TaskId, client: str) -> bool:
        return lag(task, client) <= acceptable_recovery_lag

    def ratio(client: str) -> Fraction:
        return Fraction(load[client], threads[client])

    # Rule 3: the balanced, sticky owner of each stateful task, before state is considered.
    load = dict.fromkeys(ids, 0)
    desired: dict[TaskId, str] = {}
    for task in stateful_ids:
        owner = previous.get(task)
        if owner is None:
            owner = min(ids, key=lambda c: (not caught_up(task, c), lag(task, c), ratio(c), c))
        desired[task] = owner
        load[owner] += 1
    _rebalance(
        desired,
        stateful_ids,
        load,
        threads,
        len(stateful_ids),
        lambda t, c: (not caught_up(t, c), lag(t, c), desired[t] == previous.get(t)),
    )

    # Rule 4: run each stateful task where its state is current.
    active = dict(desired)
    for task in stateful_ids:
        want = desired[task]
        if caught_up(task, want):
            continue
        ready = [c for c in ids if caught_up(task, c)]
        if ready:
            # A previous owner is always caught up: the task then stays where it is.
            previous_owner = previous.get(task)
            owner = previous_owner if previous_owner is not None else min(ready, key=lambda c: (ratio(c), c))
        else:
            owner = min(ids, key=lambda c: (lag(task, c), c != want, c))
        load[want] -= 1
        load[owner] += 1
        active[task] = owner

    # Rule 5: standbys on the next k clients of the ring after the active client.
    standby: dict[str, set[TaskId]] = {c: set() for c in ids}
    replicas = min(num_standby_replicas, len(ids) - 1)
    position = {c: i for i, c in enumerate(ids)}
    for task in stateful_ids:
        first = position[active[task]]
        for step in range(1, replicas + 1):
            standby[ids[(first + step) % len(ids)]].add(task)

    # Rules 4 and 6: warm up the desired client of every task that runs elsewhere, within the budget.
    warmup: dict[str, set[TaskId]] = {c: set() for c in ids}
    budget = max_warmup_replicas
    probing = False
    for task in stateful_ids:
        want = desired[task]
        if active[task] == want:
            continue
        if task in standby[want]:
            probing = True
        elif budget > 0:
            warmup[want].add(task)
            budget -= 1
            probing = True

    # Rule 3 again: stateless tasks fill every client towards its share of all tasks.
    for task in stateless_ids:
        owner = previous.get(task)
        if owner is None:
            owner = min(ids, key=lambda c: (ratio(c), c))
        active[task] = owner
        load[owner] += 1
    _rebalance(
        active,
        stateless_ids,
        load,
        threads,
        len(stateful_ids) + len(stateless_ids),
        lambda t, c: (active[t] == previous.get(t),),
    )

    tasks_of: dict[str, set[TaskId]] = {c: set() for c in ids}
    for task, owner in active.items():
        tasks_of[owner].add(task)
    return AssignmentResult(
        clients={
            c: ClientAssignment(frozenset(tasks_of[c]), frozenset(standby[c]), frozenset(warmup[c]))
            for c in ids
        },
        probing_rebalance_needed=probing,
        moved=frozenset(t for t, owner in previous.items() if t in active and active[t] != owner),
    )


def _validate(
    clients: Mapping[str, ClientReport],
    stateful: list[TaskId],
    stateless: list[TaskId],
    settings: Mapping[str, int],
) -> None:
    if not clients and (stateful or stateless):
        raise ValueError(
            f"No clients to assign {len(stateful) + len(stateless)} tasks to: "
            "at least one client must take part in the assignment."
        )
    for key, report in sorted(clients.items()):
        if key != report.process_id:
            raise ValueError(
                f"Client {key!r} is keyed by a process id other than its report's {report.process_id!r}."
            )
        if report.threads < 1:
            raise ValueError(
                f"Client {key!r} reported {report.threads} stream threads; a client needs at least one to "
                "run tasks. Leave it out of the assignment until it has threads."
            )
    both = sorted(set(stateful) & set(stateless))
    if both:
        raise ValueError(f"Tasks {', '.join(map(str, both))} are listed as both stateful and stateless.")
    for name, value in settings.items():
        if value < 0:
            raise ValueError(f"{name} must be >= 0, got {value}.")


def _previous_owners(clients: Mapping[str, ClientReport], ids: list[str]) -> dict[TaskId, str]:
    """The previous active client of each task. Should two clients claim one (a stale report), the
    first process id keeps it, so every client still computes the same answer."""
    owners: dict[TaskId, str] = {}
    for client in ids:
        for task in clients[client].active:
            owners.setdefault(task, client)
    return owners


def _rebalance(
    owner: dict[TaskId, str],
    movable: list[TaskId],
    load: dict[str, int],
    threads: Mapping[str, int],
    total_tasks: int,
    score: Callable[[TaskId, str], tuple[Any, ...]],
) -> None:
    """Move tasks of ``movable`` (updating ``owner`` and ``load``) until every client's load lies
    within the floor and ceiling of its share of ``total_tasks``, or no move of a movable task can get
    closer. Each move takes, among the allowed (task, receiver) pairs, the one with the lowest
    ``score``, then the least loaded receiver. Every move lessens the total distance to the bounds by
    one and creates no new violation, so the loop ends."""
    ids = sorted(load)
    capacity = sum(threads[c] for c in ids)
    low = {c: total_tasks * threads[c] // capacity for c in ids}
    high = {c: -(-total_tasks * threads[c] // capacity) for c in ids}
    while True:
        under = {c for c in ids if load[c] < low[c]}
        over = {c for c in ids if load[c] > high[c]}
        above_low = {c for c in ids if load[c] > low[c]}
        below_high = {c for c in ids if load[c] < high[c]}
        move: tuple[TaskId, str] | None = None
        # Fill a starved client from an overloaded one first: one move then fixes two clients.
        for receivers, sources in ((under, over), (under, above_low), (below_high, over)):
            pairs = [(t, r) for t in movable if owner[t] in sources for r in sorted(receivers)]
            if pairs:
                move = min(pairs, key=lambda p: (score(*p), Fraction(load[p[1]], threads[p[1]]), p[1], p[0]))
                break
        if move is None:
            return
        task, receiver = move
        load[owner[task]] -= 1
        load[receiver] += 1
        owner[task] = receiver
