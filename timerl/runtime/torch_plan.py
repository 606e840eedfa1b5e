"""How a dataflow group is lowered on torch with ``compile_groups``: its pure kernels as one function compiled
by TorchInductor (`timerl.backends.torch_backend.InductorFunction`), the torch counterpart of jax's one
`jax.jit` per group.

Eager torch runs a group op by op: each op is a Python call and a dispatch (a few microseconds) and one pass
over its arrays. The RT MMapGame's move is ~350 such ops per move, and at one game it costs 3.5 ms of CPU
whatever the arrays' sizes. Compiled, the move is a handful of C++ loops called from one Python call.

The lowering is jax's (`timerl.runtime.jax_plan.JaxGroupLowering`): members reordered so that what cannot be
compiled runs first, checks of input values (``gather``'s indices) computed inside the compiled function and
raised after it, only what is read outside returned, compiled functions shared by structure. What differs on
torch: random draws stay on the host (`timerl.runtime.rng`'s NumPy bits, not traced), and a pure member left
outside the compiled part runs eagerly (compiling it alone costs seconds and saves one dispatch), with its
check on the host like the default lowering's.
"""

from __future__ import annotations

from timerl.ops.registry import DRAW
from timerl.pdg.graph import Node
from timerl.runtime.jax_plan import JaxGroupLowering, checked
from timerl.runtime.plan import GroupLowering


class TorchCompiledLowering(JaxGroupLowering):

    def _pure(self, node: Node) -> bool:
        if node.category is DRAW:  # drawn on the host, ahead of the compiled part
            return False
        return GroupLowering._pure(self, node)

    def _evaluation(self, member: Node, args: str, outputs: list[str]) -> list[str]:
        if self._pure(member) and checked(member):  # `evaluate` checks the inputs on the host, then runs it
            self.ns[f"N{member.id}"] = member
            return [f"{', '.join(outputs)}, = evaluate(N{member.id}, point, {args}, SEED, BOUNDS, BACKEND)"]
        return GroupLowering._evaluation(self, member, args, outputs)
