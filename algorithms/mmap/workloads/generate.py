"""Regenerate `data/*.json[.gz]` and `data/xla/*.json.gz`: compile each program of the suite with XLA's dumps
on, store the dumps, parse the HLO, write its workload. One program at a time (XLA's compile is the cost).

    python -m algorithms.mmap.workloads.generate [--only NAME ...] [--missing]
"""

from __future__ import annotations

import argparse
import gzip
import json

import jax

from algorithms.mmap.workloads import DATA_DIR, Workload, check, hlo

# Stops XLA:CPU's library (YNNPACK) fusion from swallowing whole subgraphs into one custom fusion, so the
# HLO keeps one instruction per kernel. Accepted by jax 0.10.2 and 0.12 (an unknown key is rejected).
COMPILER_OPTIONS = {"xla_cpu_experimental_ynn_fusion_type": ""}
GZIP_ABOVE_BYTES = 300_000  # workload files larger than this are stored gzipped


def compiled_hlo(program, extra_options: dict | None = None) -> str:
    """The program compiled by XLA:CPU (the workloads are CPU programs, also on a machine whose jax defaults to a
    GPU: its HLO, schedule and buffer assignment differ), optimized and scheduled, as text."""
    with jax.default_device(jax.devices("cpu")[0]):
        lowered = jax.jit(program.fn, donate_argnums=program.donate_argnums).lower(*program.args)
        return lowered.compile(compiler_options={**COMPILER_OPTIONS, **(extra_options or {})}).as_text()


def record_of_text(program, text: str) -> dict:
    return hlo.to_workload(hlo.parse_module(text), program.name, program.description, jax.__version__)


def workload_record(program) -> dict:
    return record_of_text(program, compiled_hlo(program))


def dumps(record: dict) -> str:
    """JSON with one instruction or buffer per line: small diffs, easy to grep."""
    head = {key: value for key, value in record.items() if key not in ("instructions", "buffers")}
    lines = [json.dumps(head)[:-1] + ","]
    for key in ("instructions", "buffers"):
        rows = [json.dumps(row, separators=(",", ":")) for row in record[key]]
        lines.append(f' "{key}": [\n  ' + ",\n  ".join(rows) + "\n ]" + ("," if key == "instructions" else ""))
    return "\n".join(lines) + "\n}\n"


def write_workload(record: dict) -> str:
    """Write one workload file (gzipped when large), removing the other form; returns the file name."""
    text = dumps(record)
    plain, packed = DATA_DIR / f"{record['name']}.json", DATA_DIR / f"{record['name']}.json.gz"
    if len(text) > GZIP_ABOVE_BYTES:
        packed.write_bytes(gzip.compress(text.encode(), compresslevel=9, mtime=0))
        plain.unlink(missing_ok=True)
        return packed.name
    plain.write_text(text)
    packed.unlink(missing_ok=True)
    return plain.name


def main() -> None:
    from algorithms.mmap.workloads import xla_dump
    from algorithms.mmap.workloads.suite import ALL_PROGRAMS

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="*", choices=sorted(ALL_PROGRAMS), help="regenerate these workloads only")
    parser.add_argument("--missing", action="store_true", help="only programs without a stored XLA dump")
    args = parser.parse_args()
    names = args.only or list(ALL_PROGRAMS)
    if args.missing:
        names = [name for name in names if name not in xla_dump.stored_names()]
    DATA_DIR.mkdir(exist_ok=True)
    for name in names:
        program = ALL_PROGRAMS[name]()
        texts = xla_dump.capture(program)
        xla_dump.save(name, texts)
        record = record_of_text(program, texts["hlo"])
        check(Workload.from_json(record))
        written = write_workload(record)
        problems = xla_dump.disagreements(xla_dump.load(name))
        print(f"{written}: {record['num_instructions']} instructions, {len(record['buffers'])} buffers, "
              f"{len(problems)} disagreements with XLA", flush=True)
        for problem in problems[:10]:
            print("   ", problem, flush=True)


if __name__ == "__main__":
    main()
