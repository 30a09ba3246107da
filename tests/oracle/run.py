"""Compare many generated cases with Kafka Streams, for runs longer than the test suite's.

    python -m tests.oracle.run --cases 20000 --seed 7            # known differences left out
    python -m tests.oracle.run --cases 2000 --include-known      # every family
    python -m tests.oracle.run --cases 5000 --save               # shrink and save failures

Prints a line per failing case (its first difference, shrunk with --save), then a summary of
the failures by step family. Exit status 1 if any case differed.
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
import time
from pathlib import Path

from tests.oracle.compare import run_case, run_cases
from tests.oracle.differences import EXCLUDED_FAMILIES
from tests.oracle.generator import generate_cases
from tests.oracle.shrink import save_regression, shrink
from tests.oracle.spec import families
from tests.support.oracle import KafkaStreamsOracle, OracleUnavailable


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--include-known", action="store_true", help="also generate the known differences")
    parser.add_argument("--save", action="store_true", help="shrink each failure and save it as a regression")
    parser.add_argument("--max-failures", type=int, default=20, help="stop after this many failures")
    args = parser.parse_args(argv)
    exclude = frozenset() if args.include_known else EXCLUDED_FAMILIES
    cases = generate_cases(args.seed, args.cases, exclude)
    failures: collections.Counter[str] = collections.Counter()
    started = time.monotonic()
    try:
        oracle = KafkaStreamsOracle(Path(tempfile.mkdtemp(prefix="kstreams-oracle-")) / "oracle.log")
    except OracleUnavailable as exc:
        print(exc, file=sys.stderr)
        return 2
    with oracle:
        failed = 0
        for outcome in run_cases(oracle, cases, stop_at=args.max_failures):
            failed += 1
            case = outcome.case
            difference = outcome.difference or ""
            if args.save:
                case = shrink(case, lambda c: not run_case(oracle, c))
                difference = run_case(oracle, case).difference or difference
                print(f"saved {save_regression(case, difference, outcome.case['name'])}")
            print(f"{outcome.case['name']}: {difference.splitlines()[0]}")
            failures.update(families(case["spec"]))
        if failed >= args.max_failures:
            print(f"stopped after {failed} failures")
    elapsed = time.monotonic() - started
    print(f"{oracle.cases_run} cases run in {elapsed:.1f} s; {failed} differ from Kafka Streams")
    for family, count in failures.most_common(15):
        print(f"  {count:5d}  {family}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
