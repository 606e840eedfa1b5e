"""Flop estimates of HLO instructions, for the MMapGame's cost model (rules in the docstring of `hlo`)."""

from __future__ import annotations

import math
import re

from algorithms.mmap.workloads.hlo_text import HloComputation, HloInstruction, HloModule, Shape, _index

ELEMENTWISE = frozenset({
    "abs", "add", "and", "atan2", "cbrt", "ceil", "clamp", "clz", "compare", "complex", "convert", "cosine",
    "divide", "erf", "exponential", "exponential-minus-one", "floor", "imag", "is-finite", "log",
    "log-plus-one", "logistic", "map", "maximum", "minimum", "multiply", "negate", "not", "or", "popcnt",
    "power", "real", "reduce-precision", "remainder", "round-nearest-afz", "round-nearest-even", "rsqrt",
    "select", "shift-left", "shift-right-arithmetic", "shift-right-logical", "sign", "sine", "sqrt",
    "stochastic-convert", "subtract", "tan", "tanh", "xor",
})


def instruction_flops(module: HloModule, computation: HloComputation, inst: HloInstruction) -> float:
    """A rough cost: multiply-adds count 2 (dot, convolution), other arithmetic 1 per element."""
    if inst.opcode == "fusion":
        fused = module.computations[inst.attribute("calls").lstrip("%")]
        return sum(instruction_flops(module, fused, sub) for sub in fused.instructions)
    if inst.opcode == "dot":
        lhs = _operand_shape(computation, inst, 0)
        contracting = _index(inst.attribute("lhs_contracting_dims", "{}").strip("{}"))
        return 2.0 * inst.shape.num_elements * math.prod(lhs.dims[d] for d in contracting)
    if inst.opcode == "convolution":
        kernel = _operand_shape(computation, inst, 1)
        labels = inst.attribute("dim_labels", "")
        kernel_labels = labels.split("_")[1].split("->")[0]
        input_feature_size = kernel.dims[kernel_labels.index("i")]
        spatial = math.prod(kernel.dims[i] for i, label in enumerate(kernel_labels) if label not in "io")
        return 2.0 * inst.shape.num_elements * spatial * input_feature_size
    if inst.opcode in ELEMENTWISE:
        return float(sum(inst.shape.subshape(i).num_elements for i in inst.shape.leaf_indices()))
    if inst.opcode == "reduce":
        half = len(inst.operands) // 2
        return float(sum(_operand_shape(computation, inst, i).num_elements for i in range(half)))
    if inst.opcode == "reduce-window":
        window = re.search(r"size=([\dx]+)", inst.attribute("window", ""))
        size = math.prod(_index(window.group(1).replace("x", ","))) if window else 1
        return float(inst.shape.subshape(inst.shape.leaf_indices()[0]).num_elements * size)
    return 0.0


def _operand_shape(computation: HloComputation, inst: HloInstruction, number: int) -> Shape:
    name = inst.operands[number]
    return next(other.shape for other in computation.instructions if other.name == name)


# ------------------------------------------------------------------------------------------------ flatten
