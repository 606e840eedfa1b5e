"""The parser against XLA's own dumps, on the whole suite and on generated programs.

    python -m algorithms.mmap.workloads.verify                 # every stored dump (no jax needed)
    python -m algorithms.mmap.workloads.verify --family 0-99   # compile generated programs now, compare
    python -m algorithms.mmap.workloads.verify --store-family 0-11   # store those dumps for the tests

A stored program dump is also checked against its committed workload file (the same instructions and
buffers as the stored HLO gives). Exit status 1 when anything disagrees.
"""

from __future__ import annotations

import argparse
import sys
import time

from algorithms.mmap.workloads import list_workloads, load_workload, xla_dump

FAMILY_DIR = xla_dump.DUMP_DIR / "family"


def committed_workload_problems(comparison: xla_dump.Comparison) -> list[str]:
    name = comparison.dump.name
    if name not in list_workloads():
        return [f"no committed workload file for {name}"]
    workload, record = load_workload(name), comparison.record
    ours = [(i["name"], tuple(i["operands"]), tuple(i["outputs"])) for i in record["instructions"]]
    theirs = [(i.name, i.operands, i.outputs) for i in workload.instructions]
    rows = [(b["tensor_id"], b["alias_id"], b["size"], b["is_output"], b["target_time"], tuple(b["live_range"]))
            for b in record["buffers"]]
    committed = [(b.tensor_id, b.alias_id, b.size, b.is_output, b.target_time, b.live_range) for b in workload.buffers]
    return [] if (ours, rows) == (theirs, committed) else [f"committed workload {name} is not the stored HLO's"]


def check_dump(dump: xla_dump.XlaDump, committed: bool) -> tuple[int, list[str]]:
    comparison = xla_dump.Comparison.of(dump)
    problems = comparison.all() + (committed_workload_problems(comparison) if committed else [])
    return len(comparison.record["buffers"]), problems


def seeds(text: str) -> list[int]:
    first, _, last = text.partition("-")
    return list(range(int(first), int(last or first) + 1))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--family", type=seeds, help="compile generated programs FIRST-LAST now and compare")
    parser.add_argument("--store-family", type=seeds, help="compile generated programs and store their dumps")
    args = parser.parse_args(argv)
    failures = 0
    if args.family or args.store_family:
        from algorithms.mmap.workloads.family import family_program

        for seed in args.family or args.store_family:
            texts = xla_dump.capture(family_program(seed))
            if args.store_family:
                xla_dump.save(f"family_{seed}", texts, FAMILY_DIR)
            buffers, problems = check_dump(xla_dump.XlaDump.from_texts(f"family_{seed}", texts), committed=False)
            failures += bool(problems)
            print(f"family_{seed}: {buffers} buffers, {len(problems)} disagreements", *problems[:5], sep="\n    ",
                  flush=True)
        return int(failures > 0)
    print("| program | buffers | disagreements with XLA | seconds |\n|---|---|---|---|")
    for directory, committed in ((xla_dump.DUMP_DIR, True), (FAMILY_DIR, False)):
        for name in xla_dump.stored_names(directory):
            start = time.perf_counter()
            buffers, problems = check_dump(xla_dump.load(name, directory), committed)
            failures += bool(problems)
            print(f"| {name} | {buffers} | {len(problems)} | {time.perf_counter() - start:.2f} |", flush=True)
            for problem in problems[:5]:
                print("    ", problem, file=sys.stderr)
    return int(failures > 0)


if __name__ == "__main__":
    sys.exit(main())
