"""``run_application`` and ``kstreams run``: progress, clean stop on a signal, exit codes; and
``kstreams reset``'s argument errors."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import threading
import time

from kstreams.cli import main
from kstreams.cluster import EmbeddedCluster
from kstreams.tools.app_runner import EXIT_ERROR, EXIT_OK, run_application, source_topics
from tests.unit.tools.topologies_for_tests import build

MODULE = "tests.unit.tools.topologies_for_tests"


def test_run_application_stops_cleanly_when_told(tmp_path):
    cluster = EmbeddedCluster()
    cluster.create_topic("words", 1)
    cluster.create_topic("word-counts-out", 1)
    for word in ["a", "b", "a"]:
        cluster.produce("words", None, word.encode())
    stop = threading.Event()
    out = io.StringIO()
    result: list[int] = []
    config = {"application.id": "runner", "state.dir": str(tmp_path), "commit.interval.ms": 50}
    runner = threading.Thread(
        target=lambda: result.append(
            run_application(
                build(), config, cluster=cluster, stop=stop, out=out, interval=0.05, log_interval=0
            )
        )
    )
    runner.start()
    deadline = time.monotonic() + 30
    while len(cluster.read("word-counts-out")) < 2:
        assert time.monotonic() < deadline, "the application never produced its counts"
        runner.join(0.05)
    stop.set()
    runner.join(30)
    assert result == [EXIT_OK]
    cluster.close()


def test_run_application_exits_1_when_the_client_fails(tmp_path):
    cluster = EmbeddedCluster()  # no input topic: the client stops in ERROR
    config = {"application.id": "runner", "state.dir": str(tmp_path)}
    code = run_application(build(), config, cluster=cluster, out=io.StringIO(), interval=0.05)
    assert code == EXIT_ERROR
    cluster.close()


def test_source_topics_leave_repartition_topics_out():
    assert source_topics(build()) == ["words"]


def test_kstreams_run_stops_cleanly_on_sigint(tmp_path):
    props = tmp_path / "app.properties"
    props.write_text(
        f"# the demo app\napplication.id=cli-run\nstate.dir={tmp_path}/state\n", encoding="utf-8"
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "kstreams.cli", "run", f"{MODULE}:build", "--config", str(props)],
        cwd=os.getcwd(),
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        seen = []
        for line in process.stderr:  # blocks until the next log line (bounded by the kill below)
            seen.append(line)
            if "state transition from REBALANCING to RUNNING" in line:
                break
        assert any("embedded in-process cluster" in line for line in seen), seen
        process.send_signal(signal.SIGINT)
        _, rest = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, rest
    assert "Received SIGINT" in rest and "stopped cleanly" in rest


def test_kstreams_run_with_a_bad_config_exits_1(tmp_path, capsys):
    props = tmp_path / "app.properties"
    props.write_text("num.stream.threads=many\n", encoding="utf-8")
    assert main(["run", f"{MODULE}:build", "--config", str(props)]) == 1
    assert "Error: " in capsys.readouterr().err


def test_kstreams_reset_requires_a_bootstrap_server(capsys):
    assert main(["reset", "--application-id", "app", "--input-topics", "in"]) == 1
    assert "--bootstrap-server is required" in capsys.readouterr().err


def test_kstreams_reset_reports_a_bad_duration(capsys):
    code = main(
        ["reset", "--application-id", "app", "--bootstrap-server", "127.0.0.1:1", "--by-duration", "15m"]
    )
    assert code == 1
    assert "not an ISO-8601 duration" in capsys.readouterr().err
