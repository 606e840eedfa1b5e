"""Regenerate `data/*.json`: compile each program of `programs.py`, parse its HLO, write its workload.

    python -m algorithms.mmap.workloads.generate [--only NAME]
"""

from __future__ import annotations

import argparse
import json

import jax

from algorithms.mmap.workloads import DATA_DIR, Workload, check, hlo
from algorithms.mmap.workloads.programs import PROGRAMS, Program

# Stops XLA:CPU's library (YNNPACK) fusion from swallowing whole subgraphs into one custom fusion, so the
# HLO keeps one instruction per kernel. Accepted by jax 0.10.2 and 0.12 (an unknown key is rejected).
COMPILER_OPTIONS = {"xla_cpu_experimental_ynn_fusion_type": ""}


def compiled_hlo(program: Program, extra_options: dict | None = None) -> str:
    lowered = jax.jit(program.fn, donate_argnums=program.donate_argnums).lower(*program.args)
    return lowered.compile(compiler_options={**COMPILER_OPTIONS, **(extra_options or {})}).as_text()


def workload_record(program: Program) -> dict:
    module = hlo.parse_module(compiled_hlo(program))
    return hlo.to_workload(module, program.name, program.description, jax.__version__)


def dumps(record: dict) -> str:
    """JSON with one instruction or buffer per line: small diffs, easy to grep."""
    head = {key: value for key, value in record.items() if key not in ("instructions", "buffers")}
    lines = [json.dumps(head)[:-1] + ","]
    for key in ("instructions", "buffers"):
        rows = [json.dumps(row, separators=(",", ":")) for row in record[key]]
        lines.append(f' "{key}": [\n  ' + ",\n  ".join(rows) + "\n ]" + ("," if key == "instructions" else ""))
    return "\n".join(lines) + "\n}\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=sorted(PROGRAMS), help="regenerate this workload only")
    only = parser.parse_args().only
    names = [only] if only else list(PROGRAMS)
    DATA_DIR.mkdir(exist_ok=True)
    for name in names:
        record = workload_record(PROGRAMS[name]())
        check(Workload.from_json(record))
        (DATA_DIR / f"{name}.json").write_text(dumps(record))
        print(f"{name}: {record['num_instructions']} instructions, {len(record['buffers'])} buffers")


if __name__ == "__main__":
    main()
