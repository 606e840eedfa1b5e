"""The frozen loop program the executor runs: loops, conditionals, sequences and per-point instructions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Union

from timerl.symbolic import Cond, Expr, Symbol


@dataclass(frozen=True)
class Loop:
    var: Symbol
    start: Expr
    stop: Expr  # exclusive
    step: int
    body: "AstNode"


@dataclass(frozen=True)
class If:
    cond: Cond
    then: "AstNode"
    orelse: "AstNode | None" = None


@dataclass(frozen=True)
class Sequence:
    body: tuple["AstNode", ...]


@dataclass(frozen=True)
class Execute:
    """Run node ``node`` at ``point`` (one expression per dimension of its domain)."""

    node: int
    point: tuple[Expr, ...]


@dataclass(frozen=True)
class Deallocate:
    """Free the stored outputs of group ``node`` at ``point``: their last reader has run. ``parts``: only these
    outputs, as (member, output indices) pairs, where the group's outputs have different last readers (each
    output is freed after its own); None: every stored member whole."""

    node: int
    point: tuple[Expr, ...]
    parts: tuple[tuple[int, tuple[int, ...]], ...] | None = None


@dataclass(frozen=True)
class Offload:
    """Move the stored ``members`` of group ``node`` at ``point`` (None: all of them) from device to host
    memory; part of swap unit ``unit`` (`timerl.sched.timeline.Timeline.swap_pairs`), the fetch that brings
    them back has the same."""

    node: int
    point: tuple[Expr, ...]
    unit: int = 0
    members: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Fetch:
    """Move the stored ``members`` of group ``node`` at ``point`` (None: all) back from host to device memory,
    ``distance`` executions of the reading site ahead of the reader (`Timeline.swap_pairs`; a unit's fetch
    comes in one version per candidate distance until `timerl.runtime.dryrun.choose_swaps` keeps one)."""

    node: int
    point: tuple[Expr, ...]
    unit: int = 0
    members: tuple[int, ...] | None = None
    distance: int = 0


AstNode = Union[Loop, If, Sequence, Execute, Deallocate, Offload, Fetch]


class Schedule:
    """The AST of a compiled program with the graph it refers to; ``str()`` prints the loop program."""

    def __init__(self, root: AstNode, labels: dict[int, str]) -> None:
        self.root = root
        self.labels = labels

    def __str__(self) -> str:
        lines: list[str] = []
        self._render(self.root, 0, lines)
        return "\n".join(lines)

    def _render(self, node: AstNode, depth: int, lines: list[str]) -> None:
        pad = "  " * depth
        if isinstance(node, Sequence):
            for child in node.body:
                self._render(child, depth, lines)
        elif isinstance(node, Loop):
            step = f" step {node.step}" if node.step != 1 else ""
            lines.append(f"{pad}for {node.var} in {node.start} .. {node.stop}{step}:")
            self._render(node.body, depth + 1, lines)
        elif isinstance(node, If):
            lines.append(f"{pad}if {node.cond}:")
            self._render(node.then, depth + 1, lines)
            if node.orelse is not None:
                lines.append(f"{pad}else:")
                self._render(node.orelse, depth + 1, lines)
        else:
            verb = {Execute: "", Deallocate: "free ", Offload: "offload ", Fetch: "fetch "}[type(node)]
            point = ", ".join(str(e) for e in node.point)
            which = ""
            if isinstance(node, Deallocate) and node.parts is not None:
                which = " outputs " + ", ".join(f"%{member}.{k}" for member, outputs in node.parts for k in outputs)
            elif isinstance(node, (Offload, Fetch)) and node.members is not None:
                which = " members " + ", ".join(f"%{member}" for member in node.members)
            if isinstance(node, Fetch) and node.distance:
                which += f" ahead {node.distance}"
            lines.append(f"{pad}{verb}{self.labels[node.node]}[{point}]{which}")

    def count(self, kind: type) -> int:
        return sum(isinstance(node, kind) for node in every_node(self.root))


def every_node(root: AstNode) -> Iterator[AstNode]:
    """Every node of the AST below ``root`` (``root`` included), in no particular order."""
    stack: list[AstNode] = [root]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, Sequence):
            stack.extend(node.body)
        elif isinstance(node, Loop):
            stack.append(node.body)
        elif isinstance(node, If):
            stack.append(node.then)
            if node.orelse is not None:
                stack.append(node.orelse)
