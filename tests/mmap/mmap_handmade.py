"""Tiny hand-made instances with round numbers, so expected intervals, supplies and rewards can be derived by hand.

With ROUND_HARDWARE a latency in microseconds is max(flops, sum of slow sizes + sum of fast sizes / 4), a
demand is size microseconds (size * 10^6 ps), and a supply is L_I(all buffers fast) microseconds.
Granularity is 1 byte, so offsets are byte counts.
"""

from algorithms.mmap.costmodel import HardwareSpec
from algorithms.mmap.problem import build_problem

ROUND_HARDWARE = HardwareSpec(peak_flops=1e6, slow_bandwidth=1e6, fast_bandwidth=4e6, copy_bandwidth=1e6,
                              overhead_seconds=0.0)
US = 1_000_000
"""Picoseconds per microsecond: supplies and demands are in picoseconds."""


def instance(flops, buffers, name="handmade"):
    """`buffers`: (tensor_id, alias_id, size, is_output, target_time, (live_start, live_end)) in game order."""
    instructions = [{"time": t, "name": f"i{t}", "opcode": "fusion", "flops": float(f), "operands": [], "outputs": []}
                    for t, f in enumerate(flops)]
    records = []
    for index, (tensor, alias, size, is_output, target, live) in enumerate(buffers):
        instructions[target]["outputs" if is_output else "operands"].append(tensor)
        records.append({"index": index, "tensor_id": tensor, "alias_id": alias, "size": size, "is_output": is_output,
                        "target_time": target, "live_range": list(live)})
    return {"name": name, "description": "", "jax_version": "", "num_instructions": len(flops),
            "instructions": instructions, "buffers": records}


def problem(flops, buffers, fast_memory_bytes=16):
    return build_problem(instance(flops, buffers), ROUND_HARDWARE, fast_memory_bytes=fast_memory_bytes, granularity=1)
