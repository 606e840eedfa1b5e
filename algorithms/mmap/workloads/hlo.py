"""From XLA's optimized, scheduled HLO text to the buffers of an MMapGame.

The text is what `jax.jit(f).lower(*args).compile(...).as_text()` prints (XLA's dump printer abbreviates
get-tuple-element as `x#i`; that form is refused). Four steps, one section each:

1. `parse_module`: text -> frozen `HloModule` (computations, instructions in schedule order, shapes,
   attributes, the `input_output_alias` of the module header).
2. `flatten`: the module-scoped instruction sequence of XLA's `HloLiveRange` (the `InstructionSequence`
   of the `*-live-range.txt` dump): the entry's schedule, where a `while` comes after its condition's
   sequence and then its body's, and a `call` or `conditional` after its called computations in order.
   Fused computations are never expanded: a fusion is one instruction.
3. `analyze`: XLA's dataflow in SSA form, redone. A *value* (a tensor of the game) is named
   `(instruction, shape index)`, as XLA names it (`while.6{1}`). Forwarding instructions (tuple,
   get-tuple-element, bitcast, opt-barrier) define no value: they add a position to their operand's value.
   A while's carried element gets fresh *phi* values at the condition parameter, the body parameter and
   the while, unless the body passes it through unchanged (then the init value flows everywhere, as after
   XLA's phi simplification). A call forwards its arguments and its callee's root. A conditional's branch
   parameters are its operands; its result is a fresh value per leaf, except where every branch returns
   the same value (an operand passed through), which flows on, as in XLA's dataflow. Values that must
   share memory form alias groups by XLA's rules (`HloAliasAnalysis`): a while's init, parameters, body root and result;
   donated parameters and the entry outputs they alias; conditional branch roots and the result; in-place
   operations (dynamic-update-slice, scatter, fusions rooted in them, `output_to_operand_aliasing`).
   Live ranges follow `HloLiveRange`: definition to last position or use, a computation's root to the end
   of that computation, a while's init to the start of the body, read-only entry parameters to the end of
   the program, and the values of one alias group trimmed so they follow one another.
4. `to_workload`: game steps and buffers.
   - A *game step* is an instruction that does work: all but `NOT_STEPS`. Parameters and constants are
     memory that exists before the program runs; tuple, get-tuple-element, bitcast and the control-flow
     shells (while, call, conditional) only route buffers. `copy` is a step (it moves bytes). Async and
     collective start/done pairs are refused (NotImplementedError): XLA:CPU emits none for our programs.
   - Logical time counts game steps only. A value defined at a non-step (parameter, constant, phi) starts
     at the next step; a range ends at the last step at or before XLA's end, so entry outputs live to the
     last step.
   - A *buffer* is one operand use or one output definition of a tensor by a step; an instruction lists
     each distinct tensor once, operands (operand order, tuple operands by leaf) before outputs (leaves).
     Zero-byte values (tokens, empty arrays) are left out.
   - `alias_id` is shared by the tensors of one alias group when two or more of them have buffers; a group
     whose other members never meet a step (e.g. an unused while result) gives null.
   - Flops (`instruction_flops`): dot 2*batch*M*N*K, convolution 2 * output elements * kernel spatial size *
     kernel input features (the feature group size), elementwise ops their output elements, reduce its
     input elements, reduce-window output elements * window size, a fusion the sum over its fused
     computation; data movement (copy, slice, transpose, broadcast, gather, ...) 0.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Iterable

from algorithms.mmap.workloads.hlo_flops import ELEMENTWISE, instruction_flops  # noqa: F401 - re-exported
from algorithms.mmap.workloads.hlo_text import (  # noqa: F401 - parsing names re-exported
    DTYPE_BYTES,
    FORWARDING,
    HloComputation,
    HloInstruction,
    HloModule,
    HloParseError,
    Index,
    IoAlias,
    NOT_STEPS,
    Shape,
    UNSUPPORTED,
    ValueName,
    _index,
    parse_instruction,
    parse_module,
    parse_shape,
    split_top_level,
)


def flatten(module: HloModule) -> tuple[list[HloInstruction], dict[str, tuple[int, int]]]:
    """The module-scoped instruction sequence of XLA's HloLiveRange (its `InstructionSequence`), and each
    flattened computation's span [start, end) on that clock (nested computations included)."""
    sequence: list[HloInstruction] = []
    spans: dict[str, tuple[int, int]] = {}

    def visit(computation: HloComputation) -> None:
        if computation.name in spans:
            return
        start = len(sequence)
        spans[computation.name] = (start, start)
        for inst in computation.instructions:
            if inst.opcode == "while":
                visit(module.computations[inst.attribute("condition").lstrip("%")])
                visit(module.computations[inst.attribute("body").lstrip("%")])
            elif inst.opcode in ("call", "conditional"):
                for called in inst.called_computations:
                    visit(module.computations[called])
            sequence.append(inst)
        spans[computation.name] = (start, len(sequence))

    visit(module.entry_computation)
    return sequence, spans


# ----------------------------------------------------------------------------------------------- dataflow


@dataclasses.dataclass(frozen=True)
class Dataflow:
    """XLA's values with their positions, uses, alias groups and live ranges, on XLA's flattened clock."""

    sequence: tuple[HloInstruction, ...]
    value_sets: dict[str, dict[Index, ValueName]]  # instruction -> shape index -> value
    shapes: dict[ValueName, Shape]
    positions: dict[ValueName, tuple[tuple[str, Index], ...]]
    uses: dict[ValueName, tuple[str, ...]]
    alias_groups: tuple[frozenset[ValueName], ...]
    live_ranges: dict[ValueName, tuple[int, int]]

    def alias_group_of(self) -> dict[ValueName, int]:
        return {value: number for number, group in enumerate(self.alias_groups) for value in group}


class _DataflowBuilder:
    def __init__(self, module: HloModule):
        self.module = module
        self.value_sets: dict[str, dict[Index, ValueName]] = {}
        self.defined: dict[ValueName, Shape] = {}
        self.extra_aliases: list[tuple[ValueName, ValueName]] = []

    def define(self, inst: HloInstruction, index: Index) -> ValueName:
        value = (inst.name, index)
        self.defined[value] = inst.shape.subshape(index)
        return value

    def define_all(self, inst: HloInstruction) -> dict[Index, ValueName]:
        return {index: self.define(inst, index) for index in inst.shape.indices()}

    def run(self, computation: HloComputation, parameters: dict[int, dict[Index, ValueName]] | None) -> None:
        for inst in computation.instructions:
            self.value_sets[inst.name] = self.evaluate(inst, parameters)

    def evaluate(self, inst: HloInstruction, parameters) -> dict[Index, ValueName]:
        opcode = inst.opcode
        operand = lambda number: self.value_sets[inst.operands[number]]
        if opcode in UNSUPPORTED:
            raise NotImplementedError(f"{inst.name}: opcode {opcode!r} is not supported by the workload parser")
        if opcode == "parameter" and parameters is not None:
            return dict(parameters[int(inst.attribute("number"))])
        if opcode == "tuple":
            values = {(): self.define(inst, ())}
            for number in range(len(inst.operands)):
                values.update({(number,) + index: value for index, value in operand(number).items()})
            return values
        if opcode == "get-tuple-element":
            at = int(inst.attribute("index"))
            return {index[1:]: value for index, value in operand(0).items() if index[:1] == (at,)}
        if opcode in FORWARDING:
            return dict(operand(0))
        if opcode == "while":
            return self.evaluate_while(inst)
        if opcode == "call":
            callee = self.module.computations[inst.attribute("to_apply").lstrip("%")]
            self.run(callee, {n: operand(n) for n in range(len(inst.operands))})
            return dict(self.value_sets[callee.root.name])
        if opcode == "conditional":
            roots = []
            for number, branch_name in enumerate(inst.called_computations):
                branch = self.module.computations[branch_name]
                self.run(branch, {0: operand(number + 1)})
                roots.append(self.value_sets[branch.root.name])
            values = {}
            for index in inst.shape.indices():
                if inst.shape.subshape(index).is_tuple:
                    values[index] = self.define(inst, index)
                elif len({root[index] for root in roots}) == 1:  # every branch passes one operand value through
                    values[index] = roots[0][index]
                    continue
                values[index] = self.define(inst, index)
                self.extra_aliases.extend((root[index], values[index]) for root in roots)
            return values
        return self.define_all(inst)

    def evaluate_while(self, inst: HloInstruction) -> dict[Index, ValueName]:
        condition = self.module.computations[inst.attribute("condition").lstrip("%")]
        body = self.module.computations[inst.attribute("body").lstrip("%")]
        init = self.value_sets[inst.operands[0]]
        leaves = inst.shape.leaf_indices()
        passthrough = set(leaves)

        def carried(holder: HloInstruction) -> dict[Index, ValueName]:
            return {index: init[index] if index in passthrough else self.define(holder, index)
                    for index in inst.shape.indices()}

        while True:  # optimistic: drop an element from `passthrough` once the body changes it
            self.run(body, {0: carried(body.parameters[0])})
            root = self.value_sets[body.root.name]
            changed = {index for index in passthrough if root[index] != init[index]}
            if not changed:
                break
            passthrough -= changed
        self.run(condition, {0: carried(condition.parameters[0])})
        return carried(inst)


def analyze(module: HloModule) -> Dataflow:
    builder = _DataflowBuilder(module)
    entry = module.entry_computation
    builder.run(entry, None)
    sequence, spans = flatten(module)
    value_sets = {inst.name: builder.value_sets[inst.name] for inst in sequence}

    positions: dict[ValueName, list[tuple[str, Index]]] = {value: [] for value in builder.defined}
    uses: dict[ValueName, list[str]] = {value: [] for value in builder.defined}
    for inst in sequence:
        for index, value in value_sets[inst.name].items():
            positions[value].append((inst.name, index))
        for operand_name in inst.operands:
            operand_values = value_sets[operand_name]
            if inst.opcode == "get-tuple-element":
                used = [operand_values[()]]
            else:
                used = list(dict.fromkeys(operand_values.values()))
            for value in used:
                if inst.name not in uses[value]:
                    uses[value].append(inst.name)

    positions = {value: where for value, where in positions.items() if where}  # drop stale while guesses
    uses = {value: users for value, users in uses.items() if value in positions}
    alias_groups = _alias_groups(module, builder, value_sets, sequence)
    live_ranges = _live_ranges(module, sequence, spans, positions, uses, alias_groups)
    shapes = {value: builder.defined[value] for value in positions}
    return Dataflow(tuple(sequence), value_sets, shapes,
                    {v: tuple(p) for v, p in positions.items()}, {v: tuple(u) for v, u in uses.items()},
                    alias_groups, live_ranges)


def _in_place_pairs(module: HloModule, inst: HloInstruction) -> list[tuple[int, Index, Index]]:
    """(operand number, operand index, output index) that XLA's AliasInfo says must share a buffer."""
    pairs = []
    if inst.opcode == "dynamic-update-slice":
        pairs.append((0, (), ()))
    elif inst.opcode == "scatter":
        count = (len(inst.operands) - 1) // 2  # operands..., indices, updates...
        pairs.extend((0, (), ()) if count == 1 else (i, (), (i,)) for i in range(count))
    elif inst.opcode == "fusion":
        pairs.extend(_fusion_in_place_pairs(module, inst))
    aliasing = inst.attribute("output_to_operand_aliasing")
    if aliasing:
        for output, number, operand_index in re.findall(r"\{([\d,\s]*)\}\s*:\s*\(\s*(\d+)\s*,\s*\{([\d,\s]*)\}",
                                                        aliasing):
            pairs.append((int(number), _index(operand_index), _index(output)))
    return pairs


def _fusion_in_place_pairs(module: HloModule, fusion: HloInstruction) -> list[tuple[int, Index, Index]]:
    fused = module.computations[fusion.attribute("calls").lstrip("%")]
    by_name = {inst.name: inst for inst in fused.instructions}

    def follow_tuples(inst: HloInstruction, index: Index) -> tuple[HloInstruction, Index]:
        while True:
            if inst.opcode == "tuple" and index:
                inst, index = by_name[inst.operands[index[0]]], index[1:]
            elif inst.opcode == "get-tuple-element":
                inst, index = by_name[inst.operands[0]], (int(inst.attribute("index")),) + index
            else:
                return inst, index

    pairs = []
    for output_index in fusion.shape.leaf_indices():
        source, source_index = follow_tuples(fused.root, output_index)
        for number, operand_index, pair_output in _in_place_pairs(module, source):
            if pair_output != source_index:
                continue
            origin, origin_index = follow_tuples(by_name[source.operands[number]], operand_index)
            if origin.opcode == "bitcast":
                origin = by_name[origin.operands[0]]
            if origin.opcode == "parameter":
                pairs.append((int(origin.attribute("number")), origin_index, output_index))
    return pairs


def _alias_groups(module, builder, value_sets, sequence) -> tuple[frozenset[ValueName], ...]:
    parent = {value: value for value in builder.defined}

    def find(value):
        while parent[value] != value:
            parent[value] = parent[parent[value]]
            value = parent[value]
        return value

    def union(a, b):
        parent[find(a)] = find(b)

    for a, b in builder.extra_aliases:
        union(a, b)
    entry = module.entry_computation
    root_values = value_sets[entry.root.name]
    for alias in module.io_aliases:
        parameter = entry.parameters[alias.parameter_number]
        union(root_values[alias.output_index], value_sets[parameter.name][alias.parameter_index])
    for inst in sequence:
        if inst.opcode == "while":
            condition = module.computations[inst.attribute("condition").lstrip("%")]
            body = module.computations[inst.attribute("body").lstrip("%")]
            holders = [inst.operands[0], condition.parameters[0].name, body.parameters[0].name,
                       body.root.name, inst.name]
            for index in inst.shape.indices():
                for holder in holders[1:]:
                    union(value_sets[holders[0]][index], value_sets[holder][index])
        for number, operand_index, output_index in _in_place_pairs(module, inst):
            union(value_sets[inst.operands[number]][operand_index], value_sets[inst.name][output_index])
    groups: dict[ValueName, set[ValueName]] = {}
    for value in builder.defined:
        groups.setdefault(find(value), set()).add(value)
    return tuple(frozenset(group) for group in groups.values())


def _live_ranges(module, sequence, spans, positions, uses, alias_groups) -> dict[ValueName, tuple[int, int]]:
    time = {inst.name: t for t, inst in enumerate(sequence)}
    end_of_schedule = len(sequence)
    is_root = {inst.name: inst.is_root for inst in sequence}
    computation_of = {inst.name: module.computation_of(inst.name).name for inst in sequence}
    entry = module.entry_computation
    donated = {(entry.parameters[a.parameter_number].name, a.parameter_index) for a in module.io_aliases}

    def position_time(name: str) -> int:
        return spans[computation_of[name]][1] if is_root[name] else time[name]

    def use_time(name: str) -> int:
        inst = module.instruction(name)
        if inst.opcode == "while":
            body = module.computations[inst.attribute("body").lstrip("%")]
            return time[body.parameters[0].name]
        return time[name]

    ranges: dict[ValueName, list[int]] = {}
    for value, value_positions in positions.items():
        name, index = value
        inst = module.instruction(name)
        start = spans[computation_of[name]][0] if inst.opcode == "parameter" else time[name]
        end = max(position_time(position) for position, _ in value_positions)
        if inst.opcode == "parameter" and computation_of[name] == entry.name and value not in donated:
            end = end_of_schedule
        else:
            end = max([end] + [use_time(user) for user in uses[value] if module.instruction(user).opcode != "call"])
        ranges[value] = [start, end]

    order = {value: number for number, value in enumerate(positions)}
    for group in alias_groups:
        members = sorted((v for v in group if v in ranges), key=lambda v: (ranges[v][0], ranges[v][1], order[v]))
        for first, second in zip(members, members[1:]):
            first_range, second_range = ranges[first], ranges[second]
            second_range[1] = max(first_range[1], second_range[1])
            first_range[1] = min(first_range[1], second_range[0])
    return {value: (start, end) for value, (start, end) in ranges.items()}


# ----------------------------------------------------------------------------------------------- workload


def is_step(inst: HloInstruction) -> bool:
    return inst.opcode not in NOT_STEPS


@dataclasses.dataclass(frozen=True)
class StepClock:
    """Maps XLA's flattened clock (every instruction) to logical time (game steps only)."""

    steps_before: tuple[int, ...]  # steps_before[p] = number of steps at flattened positions < p

    @classmethod
    def of(cls, sequence: Iterable[HloInstruction]) -> "StepClock":
        counts = [0]
        for inst in sequence:
            counts.append(counts[-1] + is_step(inst))
        return cls(tuple(counts))

    def start(self, xla_time: int) -> int:
        return self.steps_before[xla_time]

    def end(self, xla_time: int) -> int:
        return self.steps_before[min(xla_time + 1, len(self.steps_before) - 1)] - 1


def value_label(value: ValueName) -> str:
    name, index = value
    return f"{name}{{{','.join(map(str, index))}}}"


@dataclasses.dataclass(frozen=True)
class GameStep:
    instruction: HloInstruction
    operands: tuple[ValueName, ...]  # distinct, in operand order
    outputs: tuple[ValueName, ...]  # leaves of the result, in shape order


def game_steps(module: HloModule, dataflow: Dataflow) -> list[GameStep]:
    """The instructions that are game steps, in logical-time order, with the tensors they use and define."""
    has_bytes = lambda value: dataflow.shapes[value].byte_size > 0
    steps = []
    for inst in dataflow.sequence:
        if not is_step(inst):
            continue
        operands = [dataflow.value_sets[name][index] for name in inst.operands
                    for index in module.instruction(name).shape.leaf_indices()]
        outputs = [dataflow.value_sets[inst.name][index] for index in inst.shape.leaf_indices()]
        steps.append(GameStep(inst, tuple(filter(has_bytes, dict.fromkeys(operands))),
                              tuple(filter(has_bytes, outputs))))
    return steps


def tensor_order(steps: list[GameStep]) -> list[ValueName]:
    """Tensor ids: values numbered by their first buffer."""
    return list(dict.fromkeys(value for step in steps for value in step.operands + step.outputs))


def to_workload(module: HloModule, name: str, description: str, jax_version: str) -> dict:
    """The MMapGame instance of a module, as the JSON-ready dict of `data/*.json`."""
    dataflow = analyze(module)
    clock = StepClock.of(dataflow.sequence)
    steps = game_steps(module, dataflow)
    tensor_ids = {value: number for number, value in enumerate(tensor_order(steps))}

    group_of = dataflow.alias_group_of()
    tensors_per_group: dict[int, int] = {}
    for value in tensor_ids:
        tensors_per_group[group_of[value]] = tensors_per_group.get(group_of[value], 0) + 1
    alias_ids: dict[int, int] = {}
    instructions, buffers = [], []
    for time, step in enumerate(steps):
        inst = step.instruction
        instructions.append({
            "time": time, "name": inst.name, "opcode": inst.opcode,
            "flops": instruction_flops(module, module.computation_of(inst.name), inst),
            "operands": [tensor_ids[v] for v in step.operands], "outputs": [tensor_ids[v] for v in step.outputs],
        })
        for value, is_output in [(v, False) for v in step.operands] + [(v, True) for v in step.outputs]:
            group = group_of[value]
            alias_id = alias_ids.setdefault(group, len(alias_ids)) if tensors_per_group[group] > 1 else None
            start, end = dataflow.live_ranges[value]
            buffers.append({
                "index": len(buffers), "tensor_id": tensor_ids[value], "alias_id": alias_id,
                "size": dataflow.shapes[value].byte_size, "is_output": is_output, "target_time": time,
                "live_range": [clock.start(start), clock.end(end)],
            })
    return {"name": name, "description": description, "jax_version": jax_version,
            "num_instructions": len(instructions), "instructions": instructions, "buffers": buffers}
