"""Step 1 of `hlo`: XLA's HLO text -> a frozen `HloModule` (see the docstring of `hlo` for the whole path)."""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from typing import Iterator

from timerl.errors import FileFormatError

Index = tuple[int, ...]
ValueName = tuple[str, Index]  # (defining instruction, shape index), as XLA prints `name{index}`

DTYPE_BYTES = {
    "pred": 1, "s2": 1, "s4": 1, "s8": 1, "s16": 2, "s32": 4, "s64": 8, "u2": 1, "u4": 1, "u8": 1,
    "u16": 2, "u32": 4, "u64": 8, "f8e4m3fn": 1, "f8e5m2": 1, "f8e4m3": 1, "f8e3m4": 1, "f8e4m3b11fnuz": 1,
    "f8e4m3fnuz": 1, "f8e5m2fnuz": 1, "f8e8m0fnu": 1, "bf16": 2, "f16": 2, "f32": 4, "f64": 8, "c64": 8,
    "c128": 16, "token": 0,
}

# Instructions that are not game steps: they move no data themselves.
NOT_STEPS = frozenset({
    "parameter", "constant", "tuple", "get-tuple-element", "bitcast", "opt-barrier", "domain",
    "add-dependency", "after-all", "while", "call", "conditional",
})
# Instructions that define no value of their own: their result is (part of) an operand's value.
FORWARDING = frozenset({"tuple", "get-tuple-element", "bitcast", "opt-barrier", "domain", "add-dependency"})
UNSUPPORTED = frozenset({
    "async-start", "async-update", "async-done", "copy-start", "copy-done", "send", "send-done", "recv",
    "recv-done", "all-reduce-start", "all-reduce-done", "all-gather-start", "all-gather-done",
    "collective-permute-start", "collective-permute-done",
})


class HloParseError(FileFormatError):
    """HLO text that is not a complete module (a TimeRLError, and a ValueError as before)."""


# ------------------------------------------------------------------------------------------------ shapes


@dataclasses.dataclass(frozen=True)
class Shape:
    """An array shape (`dtype`, `dims`) or a tuple shape (`dtype is None`, `elements`)."""

    dtype: str | None
    dims: tuple[int, ...] = ()
    elements: tuple["Shape", ...] = ()

    @property
    def is_tuple(self) -> bool:
        return self.dtype is None

    @property
    def num_elements(self) -> int:
        return math.prod(self.dims)

    @property
    def byte_size(self) -> int:
        if self.dtype not in DTYPE_BYTES:
            raise HloParseError(f"unknown element type {self.dtype!r}")
        return self.num_elements * DTYPE_BYTES[self.dtype]

    def subshape(self, index: Index) -> "Shape":
        shape = self
        for i in index:
            shape = shape.elements[i]
        return shape

    def indices(self, prefix: Index = ()) -> Iterator[Index]:
        """Every shape index, tuple nodes included, in pre-order (XLA's ShapeTree order)."""
        yield prefix
        for i, element in enumerate(self.elements):
            yield from element.indices(prefix + (i,))

    def leaf_indices(self) -> list[Index]:
        return [index for index in self.indices() if not self.subshape(index).is_tuple]


_ARRAY_SHAPE = re.compile(r"([a-z][a-z0-9]*)\[([^\]]*)\](\{[^}]*\})?")


def parse_shape(text: str) -> Shape:
    shape, rest = _parse_shape_prefix(text.strip())
    if rest.strip():
        raise HloParseError(f"trailing text after shape: {text!r}")
    return shape


def _parse_shape_prefix(text: str) -> tuple[Shape, str]:
    if text.startswith("("):
        elements = []
        rest = text[1:].lstrip()
        while not rest.startswith(")"):
            element, rest = _parse_shape_prefix(rest)
            elements.append(element)
            rest = rest.lstrip()
            if rest.startswith(","):
                rest = rest[1:].lstrip()
        return Shape(None, (), tuple(elements)), rest[1:]
    match = _ARRAY_SHAPE.match(text)
    if not match:
        raise HloParseError(f"cannot parse shape at {text[:60]!r}")
    dims = tuple(int(d.lstrip("<=")) for d in match.group(2).split(",") if d.strip())
    return Shape(match.group(1), dims), text[match.end():]


# ------------------------------------------------------------------------------------------------ parser


@dataclasses.dataclass(frozen=True)
class HloInstruction:
    name: str
    opcode: str
    shape: Shape
    operands: tuple[str, ...]
    attributes: tuple[tuple[str, str], ...]
    is_root: bool

    def attribute(self, key: str, default: str | None = None) -> str | None:
        for name, value in self.attributes:
            if name == key:
                return value
        return default

    @property
    def called_computations(self) -> tuple[str, ...]:
        names: list[str] = []
        for key in ("condition", "body", "calls", "to_apply", "true_computation", "false_computation",
                    "branch_computations"):
            value = self.attribute(key)
            if value is not None:
                names.extend(re.findall(r"%?([\w.\-]+)", value.strip("{}")))
        return tuple(names)


@dataclasses.dataclass(frozen=True)
class HloComputation:
    name: str
    instructions: tuple[HloInstruction, ...]  # schedule order (a scheduled module prints in that order)
    is_entry: bool

    @property
    def root(self) -> HloInstruction:
        return next(inst for inst in self.instructions if inst.is_root)

    @property
    def parameters(self) -> dict[int, HloInstruction]:
        return {int(inst.attribute("number", "0")): inst for inst in self.instructions
                if inst.opcode == "parameter"}


@dataclasses.dataclass(frozen=True)
class IoAlias:
    output_index: Index
    parameter_number: int
    parameter_index: Index


@dataclasses.dataclass(frozen=True)
class HloModule:
    name: str
    computations: dict[str, HloComputation]
    entry: str
    io_aliases: tuple[IoAlias, ...]

    @property
    def entry_computation(self) -> HloComputation:
        return self.computations[self.entry]

    def instruction(self, name: str) -> HloInstruction:
        return self._instructions[name][1]

    def computation_of(self, name: str) -> HloComputation:
        return self.computations[self._instructions[name][0]]

    @functools.cached_property
    def _instructions(self) -> dict[str, tuple[str, HloInstruction]]:
        return {inst.name: (comp.name, inst) for comp in self.computations.values() for inst in comp.instructions}


def _unquoted(text: str, start: int = 0) -> Iterator[tuple[int, str, int]]:
    """(position, character, bracket depth after it) for every character outside quoted strings."""
    depth, quote, i = 0, False, start
    while i < len(text):
        char = text[i]
        if quote:
            if char == "\\":
                i += 1
            elif char == '"':
                quote = False
        elif char == '"':
            quote = True
        else:
            if char in "({[":
                depth += 1
            elif char in ")}]":
                depth -= 1
            yield i, char, depth
        i += 1


def split_top_level(text: str, separator: str = ",") -> list[str]:
    """Split at separators outside (), {}, [] and quotes."""
    parts, start = [], 0
    for i, char, depth in _unquoted(text):
        if char == separator and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [part.strip() for part in parts if part.strip()]


def _matching_close(text: str, open_at: int) -> int:
    for i, char, depth in _unquoted(text, open_at):
        if char in ")}]" and depth == 0:
            return i
    raise HloParseError(f"unbalanced brackets in {text[:80]!r}")


_COMMENT = re.compile(r"/\*.*?\*/")
_OPERAND_NAME = re.compile(r"%([^\s,(){}%]+)")


def parse_instruction(line: str) -> HloInstruction:
    text = _COMMENT.sub("", line).strip()
    is_root = text.startswith("ROOT ")
    if is_root:
        text = text[len("ROOT "):]
    name, _, rest = text.partition(" = ")
    if not rest:
        raise HloParseError(f"not an instruction: {line.strip()[:80]!r}")
    name = name.lstrip("%")
    shape, rest = _parse_shape_prefix(rest.strip())
    opcode, paren, rest = rest.strip().partition("(")
    if not paren:
        raise HloParseError(f"{name}: no operand list")
    close = _matching_close("(" + rest, 0) - 1
    operand_text, attribute_text = rest[:close], rest[close + 1:].lstrip(", ")
    operands: tuple[str, ...] = ()
    attributes: list[tuple[str, str]] = []
    if opcode == "parameter":
        attributes.append(("number", operand_text.strip()))
    elif opcode != "constant":
        operands = tuple(_OPERAND_NAME.findall(part)[-1] for part in split_top_level(operand_text))
        if any("#" in operand for operand in operands):
            raise HloParseError(f"{name}: operand shorthand 'x#i' (XLA's dump printer elides "
                                "get-tuple-element) is not supported: parse `compiled.as_text()`")
    for attribute in split_top_level(attribute_text):
        key, _, value = attribute.partition("=")
        attributes.append((key.strip(), value.strip()))
    return HloInstruction(name, opcode, shape, operands, tuple(attributes), is_root)


def _parse_io_aliases(header: str) -> tuple[IoAlias, ...]:
    start = header.find("input_output_alias=")
    if start < 0:
        return ()
    open_at = header.index("{", start)
    block = header[open_at + 1:_matching_close(header, open_at)]
    aliases = []
    for output, number, param in re.findall(r"\{([\d,\s]*)\}\s*:\s*\(\s*(\d+)\s*,\s*\{([\d,\s]*)\}", block):
        aliases.append(IoAlias(_index(output), int(number), _index(param)))
    return tuple(aliases)


def _index(text: str) -> Index:
    return tuple(int(part) for part in text.split(",") if part.strip())


def parse_module(text: str) -> HloModule:
    lines = text.splitlines()
    header = next((line for line in lines if line.startswith("HloModule ")), None)
    if header is None:
        raise HloParseError("no 'HloModule' header line")
    module_name = header.split()[1].rstrip(",")
    computations: dict[str, HloComputation] = {}
    entry = None
    current: tuple[str, bool, list[HloInstruction]] | None = None
    for line in lines:
        if current is None:
            stripped = line.strip()
            if stripped.endswith("{") and (stripped.startswith("%") or stripped.startswith("ENTRY ")):
                is_entry = stripped.startswith("ENTRY ")
                name = stripped.removeprefix("ENTRY ").split()[0].lstrip("%")
                current = (name, is_entry, [])
        elif line.strip() == "}":
            name, is_entry, instructions = current
            computations[name] = HloComputation(name, tuple(instructions), is_entry)
            entry = name if is_entry else entry
            current = None
        elif line.strip():
            current[2].append(parse_instruction(line))
    if current is not None:
        raise HloParseError(f"truncated: computation {current[0]} is not closed with '}}'")
    if entry is None:
        raise HloParseError("no ENTRY computation")
    _check_references(computations)
    return HloModule(module_name, computations, entry, _parse_io_aliases(header))


def _check_references(computations: dict[str, HloComputation]) -> None:
    """Every computation has one ROOT, every operand names an instruction of its computation defined before
    it, every called computation exists: what the analyses after parsing rely on."""
    for computation in computations.values():
        roots = [inst.name for inst in computation.instructions if inst.is_root]
        if len(roots) != 1:
            raise HloParseError(f"computation {computation.name} has {len(roots)} ROOT instructions, not one")
        defined: set[str] = set()
        for inst in computation.instructions:
            missing = [name for name in inst.operands if name not in defined]
            if missing:
                raise HloParseError(f"{inst.name} in {computation.name} reads {missing[0]}, which is not an "
                                    "instruction defined before it")
            unknown = [name for name in inst.called_computations if name not in computations]
            if unknown:
                raise HloParseError(f"{inst.name} calls computation {unknown[0]}, which the module does not define")
            defined.add(inst.name)


# ------------------------------------------------------------------------------------------------- flops
