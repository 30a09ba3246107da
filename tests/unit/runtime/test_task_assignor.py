"""The high-availability task assignor: one active per task, balance by threads, stickiness, state
awareness with warm-ups and probing rebalances, standby placement, determinism and convergence."""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kstreams.processor import TaskId
from kstreams.runtime.assignment.task_assignor import AssignmentResult, ClientReport, assign_tasks


def tasks(count: int, subtopology: int = 0) -> list[TaskId]:
    return [TaskId(subtopology, p) for p in range(count)]


def client(
    process_id: str,
    threads: int = 1,
    active: Iterable[TaskId] = (),
    standby: Iterable[TaskId] = (),
    lags: Mapping[TaskId, int] | None = None,
) -> ClientReport:
    return ClientReport(process_id, threads, frozenset(active), frozenset(standby), dict(lags or {}))


def by_id(*reports: ClientReport) -> dict[str, ClientReport]:
    return {r.process_id: r for r in reports}


def owners(result: AssignmentResult) -> dict[TaskId, str]:
    """The active client of each task, asserting there is exactly one."""
    found: dict[TaskId, str] = {}
    for pid, assignment in result.clients.items():
        for task in assignment.active:
            assert task not in found, f"{task} active on {found[task]} and {pid}"
            found[task] = pid
    return found


def next_round(
    result: AssignmentResult,
    previous: Mapping[str, ClientReport],
    threads: Mapping[str, int] | None = None,
) -> dict[str, ClientReport]:
    """The reports after ``result`` ran until every replica caught up: the lags each client held before
    stay (state on disk), and every task it now runs or replicates reports lag 0."""
    reports = {}
    for pid, assignment in result.clients.items():
        held = assignment.active | assignment.standby | assignment.warmup
        lags = {**previous[pid].lags, **dict.fromkeys(held, 0)} if pid in previous else dict.fromkeys(held, 0)
        count = (threads or {}).get(pid) or previous[pid].threads
        reports[pid] = client(pid, count, assignment.active, assignment.standby | assignment.warmup, lags)
    return reports


def test_every_task_gets_exactly_one_active_client() -> None:
    stateful, stateless = tasks(7), tasks(5, subtopology=1)
    result = assign_tasks(by_id(client("a"), client("b", 2), client("c")), stateful, stateless)

    assert sorted(owners(result)) == sorted(stateful + stateless)
    assert set(result.clients) == {"a", "b", "c"}
    assert result.moved == frozenset()


def test_the_result_does_not_depend_on_input_order() -> None:
    rng = random.Random(7)
    stateful, stateless = tasks(12), tasks(6, subtopology=1)
    reports = [
        client("a", 2, active=stateful[:6], lags={t: 0 for t in stateful[:8]}),
        client("b", 1, active=stateful[6:9] + stateless[:2], lags={t: 500 for t in stateful[3:]}),
        client("c", 3, lags={t: 20_000 for t in stateful[::2]}),
        client("d", 1),
    ]
    expected = assign_tasks(by_id(*reports), stateful, stateless, num_standby_replicas=1)
    for _ in range(20):
        rng.shuffle(reports)
        shuffled_stateful, shuffled_stateless = rng.sample(stateful, len(stateful)), stateless[::-1]
        again = assign_tasks(by_id(*reports), shuffled_stateful, shuffled_stateless, num_standby_replicas=1)
        assert again == expected


@pytest.mark.parametrize("stateless_count", [0, 5, 12])
def test_tasks_are_balanced_by_threads(stateless_count: int) -> None:
    stateful, stateless = tasks(12), tasks(stateless_count, subtopology=1)
    result = assign_tasks(by_id(client("a", 1), client("b", 3)), stateful, stateless)

    total = len(stateful) + len(stateless)
    loads = {pid: len(a.active) for pid, a in result.clients.items()}
    for pid, threads in (("a", 1), ("b", 3)):
        assert abs(loads[pid] - total * threads / 4) < 1
    # Stateful tasks are balanced among themselves too, not just the totals.
    assert len(result.clients["a"].active & set(stateful)) == 3


def test_rerunning_on_its_own_result_moves_nothing() -> None:
    stateful, stateless = tasks(10), tasks(4, subtopology=1)
    reports = by_id(client("a", 2), client("b"), client("c"))
    first = assign_tasks(reports, stateful, stateless, num_standby_replicas=1)

    second = assign_tasks(next_round(first, reports), stateful, stateless, num_standby_replicas=1)

    assert second.moved == frozenset()
    assert second == first


def test_scale_out_warms_up_the_new_client_before_moving_tasks_to_it() -> None:
    stateful = tasks(12)
    old = {pid: stateful[i * 4 : i * 4 + 4] for i, pid in enumerate("abc")}
    reports = by_id(
        *(client(pid, active=owned, lags=dict.fromkeys(owned, 0)) for pid, owned in old.items()), client("d")
    )

    first = assign_tasks(reports, stateful, [])

    assert first.moved == frozenset()
    assert first.clients["d"].active == frozenset()
    warmups = first.clients["d"].warmup
    assert 0 < len(warmups) <= 2
    assert first.probing_rebalance_needed

    # The probing rebalance after the warm-ups caught up hands exactly those tasks to the new client.
    second = assign_tasks(next_round(first, reports), stateful, [])

    assert warmups <= second.clients["d"].active
    assert second.moved == warmups
    assert second.probing_rebalance_needed  # the third task is still to move

    third = assign_tasks(next_round(second, next_round(first, reports)), stateful, [])
    assert {len(a.active) for a in third.clients.values()} == {3}
    assert not third.probing_rebalance_needed


def test_warmups_respect_their_budget() -> None:
    stateful = tasks(20)
    reports = by_id(client("a", active=stateful, lags=dict.fromkeys(stateful, 0)), client("b"), client("c"))

    for budget in (0, 1, 3):
        result = assign_tasks(reports, stateful, [], max_warmup_replicas=budget)
        assert sum(len(a.warmup) for a in result.clients.values()) == budget
        assert result.probing_rebalance_needed == (budget > 0)
        assert result.moved == frozenset()


def test_a_restarted_client_with_state_gets_its_tasks_back_before_a_client_without_state() -> None:
    stateful = tasks(6)
    mine = stateful[:2]  # as many as "b"'s balanced share
    reports = by_id(
        # "a" ran everything while "b" restarted; "b" still has its old tasks on disk, a little behind.
        client("a", active=stateful, lags=dict.fromkeys(stateful, 0)),
        client("b", lags=dict.fromkeys(mine, 40)),
        client("0-new"),  # sorts first, so only the lags can make "b" win
    )

    result = assign_tasks(reports, stateful, [])

    assert result.clients["b"].active == frozenset(mine)
    assert result.clients["0-new"].active == frozenset()
    assert len(result.clients["0-new"].warmup) == 2


def test_orphaned_tasks_go_to_the_client_holding_their_state() -> None:
    stateful = tasks(4)
    reports = by_id(client("a", lags={stateful[0]: 5, stateful[1]: 5}), client("b", lags={stateful[2]: 0}))

    result = assign_tasks(reports, stateful, [])

    assert owners(result)[stateful[0]] == owners(result)[stateful[1]] == "a"
    assert owners(result)[stateful[2]] == "b"
    assert not result.probing_rebalance_needed


def test_without_a_caught_up_client_the_least_lag_client_runs_the_task() -> None:
    stateful = tasks(2)
    far = 1_000_000
    reports = by_id(
        client("a", lags={stateful[0]: far, stateful[1]: far}),
        client("b", lags={stateful[0]: far * 2, stateful[1]: far * 3}),
        client("c", lags={stateful[1]: far // 2}),
    )

    result = assign_tasks(reports, stateful, [])

    assert owners(result) == {stateful[0]: "a", stateful[1]: "c"}


def test_without_a_caught_up_client_balance_waits_for_a_warmup() -> None:
    stateful = tasks(2)
    far = 1_000_000
    reports = by_id(client("a", lags=dict.fromkeys(stateful, far)), client("b"))

    result = assign_tasks(reports, stateful, [])

    # Balance wants one task on "b", but "a" restores both faster; "b" warms one up meanwhile.
    assert result.clients["a"].active == frozenset(stateful)
    assert len(result.clients["b"].warmup) == 1
    assert result.probing_rebalance_needed


def test_standbys_are_never_on_the_active_client_and_are_capped_by_client_count() -> None:
    stateful, stateless = tasks(6), tasks(3, subtopology=1)
    reports = by_id(client("a"), client("b"), client("c"))

    for replicas, expected in ((1, 1), (2, 2), (5, 2)):
        result = assign_tasks(reports, stateful, stateless, num_standby_replicas=replicas)
        active = owners(result)
        for task in stateful:
            holders = [pid for pid, a in result.clients.items() if task in a.standby]
            assert len(holders) == expected
            assert active[task] not in holders
        assert all(not (a.standby & set(stateless)) for a in result.clients.values())


def test_standbys_follow_the_ring_of_process_ids() -> None:
    stateful = tasks(3)
    reports = by_id(*(client(pid, active=[t]) for pid, t in zip("abc", stateful, strict=True)))

    result = assign_tasks(reports, stateful, [], num_standby_replicas=1)

    assert {pid: set(a.standby) for pid, a in result.clients.items()} == {
        "a": {stateful[2]},
        "b": {stateful[0]},
        "c": {stateful[1]},
    }


def test_a_standby_on_the_desired_client_serves_as_its_warmup() -> None:
    stateful = tasks(2)
    # "a" runs both; the ring puts their standbys on "b", which is where balance wants one of them.
    reports = by_id(client("a", active=stateful), client("b"))

    result = assign_tasks(reports, stateful, [], num_standby_replicas=1)

    assert result.clients["b"].standby == frozenset(stateful)
    assert result.clients["b"].warmup == frozenset()
    assert result.probing_rebalance_needed


@pytest.mark.parametrize(
    ("reports", "message"),
    [
        ({}, "No clients"),
        ({"a": ClientReport("a", 0, frozenset(), frozenset(), {})}, "0 stream threads"),
        ({"a": client("b")}, "process id"),
    ],
)
def test_invalid_input_is_refused(reports: dict[str, ClientReport], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        assign_tasks(reports, tasks(1), [])


@pytest.mark.parametrize(
    "setting", ["num_standby_replicas", "max_warmup_replicas", "acceptable_recovery_lag"]
)
def test_a_negative_setting_is_refused(setting: str) -> None:
    with pytest.raises(ValueError, match=setting):
        assign_tasks(by_id(client("a")), tasks(1), [], **{setting: -1})


def test_no_clients_and_no_tasks_is_an_empty_assignment() -> None:
    assert assign_tasks({}, [], []) == AssignmentResult({}, False, frozenset())


def test_a_task_both_stateful_and_stateless_is_refused() -> None:
    with pytest.raises(ValueError, match="both stateful and stateless"):
        assign_tasks(by_id(client("a")), tasks(1), tasks(1))


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[dict[str, ClientReport], list[TaskId], list[TaskId], int]:
    stateful = tasks(draw(st.integers(0, 12)))
    stateless = tasks(draw(st.integers(0, 6)), subtopology=1)
    pids = draw(st.lists(st.sampled_from("abcdef"), min_size=1, max_size=5, unique=True))
    owner_of = {t: draw(st.sampled_from([*pids, None])) for t in stateful + stateless}
    lag = st.one_of(st.none(), st.sampled_from([0, 5, 10_000, 10_001, 50_000]))
    reports = {}
    for pid in pids:
        lags = {t: value for t in stateful if (value := draw(lag)) is not None}
        active = [t for t, o in owner_of.items() if o == pid]
        reports[pid] = client(pid, draw(st.integers(1, 4)), active, lags=lags)
    return reports, stateful, stateless, draw(st.integers(0, 3))


@settings(max_examples=300, deadline=None)
@given(scenarios(), st.randoms(use_true_random=False))
def test_invariants_hold_for_any_input(
    scenario: tuple[dict[str, ClientReport], list[TaskId], list[TaskId], int], rng: random.Random
) -> None:
    reports, stateful, stateless, replicas = scenario
    result = assign_tasks(reports, stateful, stateless, num_standby_replicas=replicas)
    active = owners(result)

    assert sorted(active) == sorted(stateful + stateless)
    warmups = 0
    for a in result.clients.values():
        assert not (a.active & (a.standby | a.warmup)), "a replica on the client running the task"
        assert not (a.standby & a.warmup)
        assert (a.standby | a.warmup) <= set(stateful)
        warmups += len(a.warmup)
    assert warmups <= 2
    if warmups:
        assert result.probing_rebalance_needed
    for task in stateful:
        # The active is caught up whenever any client is (previous owners are, by definition).
        lags = {pid: 0 if task in r.active else r.lags.get(task, float("inf")) for pid, r in reports.items()}
        if min(lags.values()) <= 10_000:
            assert lags[active[task]] <= 10_000
        else:
            assert lags[active[task]] == min(lags.values())

    shuffled = dict(rng.sample(list(reports.items()), len(reports)))
    again = assign_tasks(
        shuffled, rng.sample(stateful, len(stateful)), stateless[::-1], num_standby_replicas=replicas
    )
    assert again == result


@settings(max_examples=150, deadline=None)
@given(scenarios())
def test_repeated_rounds_converge_to_a_balanced_stable_assignment(
    scenario: tuple[dict[str, ClientReport], list[TaskId], list[TaskId], int],
) -> None:
    reports, stateful, stateless, replicas = scenario
    result = assign_tasks(reports, stateful, stateless, num_standby_replicas=replicas)
    for _ in range(len(stateful) * len(reports) + 2):
        if not result.probing_rebalance_needed:
            break
        reports = next_round(result, reports)
        result = assign_tasks(reports, stateful, stateless, num_standby_replicas=replicas)
    assert not result.probing_rebalance_needed

    # Converged: another round changes nothing.
    again = assign_tasks(next_round(result, reports), stateful, stateless, num_standby_replicas=replicas)
    assert again.clients == result.clients
    assert again.moved == frozenset()
    total_threads = sum(r.threads for r in reports.values())
    for pid, a in result.clients.items():
        share = reports[pid].threads / total_threads
        assert abs(len(a.active & set(stateful)) - len(stateful) * share) < 1
        # Few stateless tasks may not even out the stateful rounding: one more task off is allowed.
        assert abs(len(a.active) - (len(stateful) + len(stateless)) * share) < 2
