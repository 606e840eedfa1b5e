"""XLA's own analyses of a compiled program, stored next to its workload, and the parser checked against them.

`capture` compiles a program with XLA's dumps on and keeps three texts: the optimized, scheduled HLO we
parse (`as_text()`), XLA's `*-live-range.txt` (the flattened instruction sequence and every value's live
range on that clock) and the allocation lines of `*-buffer-assignment.txt` (which allocation and offset
each value got). `save`/`load` keep them gzipped in `data/xla/NAME.json.gz`, so the comparison runs
without jax. `disagreements` lists every place where `hlo.py` differs from XLA:

- the flattened sequence (XLA's `InstructionSequence`);
- every value and its live range on XLA's clock;
- every live range of the workload on the game-step clock (entry parameters aside: XLA extends read-only
  ones to the end, and the game keeps that);
- every alias group in one XLA allocation at one offset;
- the workload written from the stored HLO equal to the committed workload file.
"""

from __future__ import annotations

import bisect
import dataclasses
import gzip
import json
import re
import tempfile
from pathlib import Path

from algorithms.mmap.workloads import DATA_DIR, hlo
from algorithms.mmap.workloads.hlo_text import HloParseError
from timerl.errors import FileFormatError
from timerl.files import child_path, read_json

DUMP_DIR = DATA_DIR / "xla"
DUMP_TEXTS = ("hlo", "live_range", "buffer_assignment")


@dataclasses.dataclass(frozen=True)
class XlaDump:
    name: str
    hlo_text: str
    sequence: tuple[str, ...]
    live_ranges: dict  # (instruction, shape index) -> (start, end) on XLA's clock
    allocations: dict  # (instruction, shape index) -> (allocation, offset)

    @classmethod
    def from_texts(cls, name: str, texts: dict) -> "XlaDump":
        if texts["live_range"].count("BufferLiveRange:") != 1:
            raise HloParseError("the live-range text has no single 'BufferLiveRange:' section")
        sequence_text, ranges_text = texts["live_range"].split("BufferLiveRange:")
        sequence = tuple(re.findall(r"^\s+\d+:(\S+)$", sequence_text, re.M))
        live_ranges = {
            (inst, _index(index)): (int(start), int(end))
            for inst, index, start, end in re.findall(r"^\s+(\S+?)\{([\d,]*)\}:(\d+)-(\d+)$",
                                                      ranges_text.split("Live ranges at")[0], re.M)}
        return cls(name, texts["hlo"], sequence, live_ranges, _allocations(texts["buffer_assignment"]))


def _index(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(",") if part)


def _allocations(text: str) -> dict:
    where, allocation = {}, None
    for line in text.splitlines():
        if match := re.match(r"allocation (\d+):", line):
            allocation = int(match.group(1))
        elif match := re.match(r"\s+value: <\d+ (\S+?)(?:\{([\d,]*)\})?(?: \(phi\))? @\d+> "
                               r"\(size=\d+,offset=(\d+)\)", line):
            where[(match.group(1), _index(match.group(2) or ""))] = (allocation, int(match.group(3)))
    return where


def capture(program, extra_options: dict | None = None) -> dict:
    """Compile `program` with XLA's dumps on; the three texts `XlaDump.from_texts` reads."""
    from algorithms.mmap.workloads.generate import compiled_hlo  # needs jax

    with tempfile.TemporaryDirectory(prefix="xla_dump_") as directory:
        options = {"xla_dump_to": directory, "xla_dump_hlo_as_text": True, **(extra_options or {})}
        text = compiled_hlo(program, options)
        module_name = hlo.parse_module(text).name

        def read(suffix: str) -> str:
            paths = sorted(Path(directory).glob(f"*.{module_name}.cpu_after_optimizations-{suffix}.txt"))
            assert paths, f"XLA wrote no *-{suffix}.txt for {module_name}"
            return paths[-1].read_text()

        assignment = "\n".join(line for line in read("buffer-assignment").splitlines()
                               if line.startswith("allocation ") or line.lstrip().startswith("value:"))
        return {"hlo": text, "live_range": read("live-range"), "buffer_assignment": assignment}


def save(name: str, texts: dict, directory: Path = DUMP_DIR) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = _dump_path(directory, name)
    path.write_bytes(gzip.compress(json.dumps(texts).encode(), compresslevel=9, mtime=0))
    return path


def _dump_path(directory: Path, name: str) -> Path:
    """``directory/NAME.json.gz``, with ``name`` checked to stay inside ``directory`` (`child_path`)."""
    inside = child_path(directory, name, "a dump's name")
    return inside.with_name(inside.name + ".json.gz")


def stored_names(directory: Path = DUMP_DIR) -> list[str]:
    return sorted(path.name[:-len(".json.gz")] for path in directory.glob("*.json.gz"))


def load(name: str, directory: Path = DUMP_DIR) -> XlaDump:
    path = _dump_path(directory, name)
    texts = read_json(path, "XLA dump")
    if not isinstance(texts, dict) or not all(isinstance(texts.get(k), str) for k in DUMP_TEXTS):
        raise FileFormatError(f"{path}: an XLA dump holds the texts {', '.join(DUMP_TEXTS)}")
    try:
        return XlaDump.from_texts(name, texts)
    except (HloParseError, ValueError, KeyError, IndexError) as error:
        raise FileFormatError(f"{path}: {type(error).__name__}: {error}") from error


@dataclasses.dataclass(frozen=True)
class Comparison:
    """The parser's view of a dump, and what XLA says, side by side."""

    dump: XlaDump
    module: hlo.HloModule
    dataflow: hlo.Dataflow
    record: dict

    @classmethod
    def of(cls, dump: XlaDump) -> "Comparison":
        module = hlo.parse_module(dump.hlo_text)
        return cls(dump, module, hlo.analyze(module), hlo.to_workload(module, dump.name, "", ""))

    def sequence(self) -> list[str]:
        ours = [inst.name for inst in self.dataflow.sequence]
        return [] if ours == list(self.dump.sequence) else [f"sequence differs (ours {len(ours)}, "
                                                             f"XLA {len(self.dump.sequence)} instructions)"]

    def live_ranges(self) -> list[str]:
        ours, theirs = self.dataflow.live_ranges, self.dump.live_ranges
        problems = [f"value {hlo.value_label(v)}: ours {ours.get(v)}, XLA {theirs.get(v)}"
                    for v in sorted(set(ours) | set(theirs)) if ours.get(v) != theirs.get(v)]
        return problems

    def step_live_ranges(self) -> list[str]:
        """The workload's ranges are XLA's, moved to the first step at/after the start and the last at/before the end."""
        step_names = [inst["name"] for inst in self.record["instructions"]]
        position = {inst: number for number, inst in enumerate(self.dump.sequence)}
        step_positions = [position[inst] for inst in step_names]
        if step_positions != sorted(step_positions):
            return ["game steps are not in XLA's order"]
        to_steps = lambda start, end: [bisect.bisect_left(step_positions, start),
                                       bisect.bisect_right(step_positions, end) - 1]
        entry_parameters = {p.name for p in self.module.entry_computation.parameters.values()}
        tensors = hlo.tensor_order(hlo.game_steps(self.module, self.dataflow))
        ranges = {b["tensor_id"]: b["live_range"] for b in self.record["buffers"]}
        problems = []
        for tensor_id, value in enumerate(tensors):
            if value[0] in entry_parameters:
                continue
            if value not in self.dump.live_ranges:
                problems.append(f"tensor {tensor_id} ({hlo.value_label(value)}): no such value in XLA's live ranges")
                continue
            expected = to_steps(*self.dump.live_ranges[value])
            if ranges[tensor_id] != expected:
                problems.append(f"tensor {tensor_id} ({hlo.value_label(value)}): {ranges[tensor_id]} vs {expected}")
        return problems

    def alias_groups(self) -> list[str]:
        problems = []
        for group in self.dataflow.alias_groups:
            if len(group) > 1 and len({self.dump.allocations.get(value) for value in group}) != 1:
                where = {hlo.value_label(v): self.dump.allocations.get(v) for v in sorted(group)}
                problems.append(f"alias group split across XLA allocations: {where}")
        return problems

    def all(self) -> list[str]:
        return self.sequence() + self.live_ranges() + self.step_live_ranges() + self.alias_groups()


def disagreements(dump: XlaDump) -> list[str]:
    return Comparison.of(dump).all()
