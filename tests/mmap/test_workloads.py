"""MMapGame workloads: the HLO parser against XLA's own dumps, against hand-derived answers on small HLO,
and the committed JSON files against the workload invariants."""

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from jax import lax

from algorithms.mmap.workloads import (DATA_DIR, Workload, check, generate, hlo, list_workloads,
                                       load_workload, verify, xla_dump)
from algorithms.mmap.workloads.programs import PROGRAMS, Program, spec
from algorithms.mmap.workloads.suite import ALL_PROGRAMS

REPO_ROOT = Path(__file__).resolve().parents[2]

# ----------------------------------------------------------------------------------- agreement with XLA



def switch_program() -> Program:
    """Conditionals, which no workload has: a three-way switch, then a two-way cond."""

    def f(w, x, branch):
        y = lax.switch(branch, [lambda x: jnp.tanh(x @ w), lambda x: jax.nn.relu(x @ w.T), lambda x: x + 1.0], x)
        return lax.cond(y.sum() > 0, lambda t: t * 3, lambda t: t - w, y).sum(), w * 2

    return Program("switch", "", f, (spec(32, 32), spec(32, 32), spec(dtype=jnp.int32)), donate_argnums=(0,))


FAMILY_DIR = xla_dump.DUMP_DIR / "family"
# Parsing a dump takes ~0.1 s per 1,000 buffers: `make test` compares every stored dump up to this size
# (and all of the generated family); TIMERL_MMAP_ALL_DUMPS=1, or `python -m algorithms.mmap.workloads.verify`,
# compares every one.
FAST_DUMP_BUFFERS = 3000
STORED = [name for name in xla_dump.stored_names()
          if os.environ.get("TIMERL_MMAP_ALL_DUMPS") or load_workload(name).num_buffers <= FAST_DUMP_BUFFERS]
FAMILY = xla_dump.stored_names(FAMILY_DIR)


@functools.lru_cache(maxsize=None)
def comparison(name: str, directory: Path = xla_dump.DUMP_DIR) -> xla_dump.Comparison:
    return xla_dump.Comparison.of(xla_dump.load(name, directory))


def test_every_program_of_the_suite_has_a_stored_xla_dump_and_the_family_is_there():
    assert xla_dump.stored_names() == sorted(ALL_PROGRAMS)
    assert len(FAMILY) >= 12


@pytest.mark.parametrize("name", STORED)
def test_flattened_sequence_is_xlas(name):
    assert comparison(name).sequence() == []


@pytest.mark.parametrize("name", STORED)
def test_values_and_live_ranges_on_xlas_clock_are_xlas(name):
    assert comparison(name).live_ranges() == []


@pytest.mark.parametrize("name", STORED)
def test_workload_live_ranges_are_xlas_on_the_step_clock(name):
    assert comparison(name).step_live_ranges() == []


@pytest.mark.parametrize("name", STORED)
def test_alias_groups_share_xlas_allocation_and_offset(name):
    assert comparison(name).alias_groups() == []
    assert any(len(group) > 1 for group in comparison(name).dataflow.alias_groups)


@pytest.mark.parametrize("name", STORED)
def test_committed_workload_is_the_one_the_stored_hlo_gives(name):
    assert verify.committed_workload_problems(comparison(name)) == []


@pytest.mark.parametrize("name", FAMILY)
def test_generated_programs_agree_with_xla(name):
    assert comparison(name, FAMILY_DIR).all() == []


def test_the_family_has_nested_control_flow_tuples_in_place_updates_and_donation():
    opcodes, donated = set(), 0
    for name in FAMILY:
        module = comparison(name, FAMILY_DIR).module
        opcodes |= {inst.opcode for c in module.computations.values() for inst in c.instructions}
        donated += len(module.io_aliases) > 0
        nested = [c for c in module.computations.values()
                  if any(inst.opcode in ("while", "conditional") for inst in c.instructions)]
        if len(nested) > 1:  # control flow inside a loop body or a branch
            opcodes.add("nested")
    assert {"while", "conditional", "dynamic-update-slice", "tuple", "nested"} <= opcodes
    assert donated == len(FAMILY)


def test_capturing_a_program_now_agrees_with_xla():
    """End to end with the installed jax: conditionals (a switch, then a cond) compiled and compared now."""
    texts = xla_dump.capture(switch_program())
    dump = xla_dump.XlaDump.from_texts("switch", texts)
    assert xla_dump.disagreements(dump) == []
    assert "conditional" in {inst.opcode for inst in xla_dump.Comparison.of(dump).dataflow.sequence}


def test_the_library_fusion_option_is_a_real_option():
    lowered = jax.jit(lambda x: x @ x).lower(jax.ShapeDtypeStruct((8, 8), "float32"))
    lowered.compile(compiler_options=generate.COMPILER_OPTIONS)
    with pytest.raises(Exception, match="No such compile option"):
        lowered.compile(compiler_options={"xla_no_such_option_for_this_test": ""})


# ------------------------------------------------------------------------------------- hand-written HLO

TUPLE_HLO = """
HloModule tuple_test, is_scheduled=true, input_output_alias={ {1}: (0, {}, may-alias) }

%fused_pair (p0: f32[4,8]) -> (f32[4,8], f32[4,8]) {
  %p0 = f32[4,8]{1,0} parameter(0)
  %neg = f32[4,8]{1,0} negate(%p0)
  %exp = f32[4,8]{1,0} exponential(%p0)
  ROOT %pair = (f32[4,8]{1,0}, f32[4,8]{1,0}) tuple(%neg, %exp)
}

ENTRY %main (x: f32[4,8], w: f32[8,16]) -> (f32[4,16], f32[4,8]) {
  %x = f32[4,8]{1,0} parameter(0)
  %w = f32[8,16]{1,0} parameter(1)
  %pair_fusion = (f32[4,8]{1,0}, /*index=1*/f32[4,8]{1,0}) fusion(%x), kind=kLoop, calls=%fused_pair
  %neg_out = f32[4,8]{1,0} get-tuple-element(%pair_fusion), index=0
  %exp_out = f32[4,8]{1,0} get-tuple-element(%pair_fusion), index=1
  %square = f32[4,8]{1,0} multiply(%neg_out, %neg_out)
  %dot = f32[4,16]{1,0} dot(%square, %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %sum = f32[4,8]{1,0} add(%exp_out, %square), metadata={op_name="a, b = (c)" source_file="x.py"}
  ROOT %out = (f32[4,16]{1,0}, f32[4,8]{1,0}) tuple(%dot, %sum)
}
"""

WHILE_HLO = """
HloModule while_test, is_scheduled=true

%cond (c_param: (s32[], f32[16], f32[16])) -> pred[] {
  %c_param = (s32[], f32[16]{0}, f32[16]{0}) parameter(0)
  %c_limit = s32[] constant(4)
  %c_count = s32[] get-tuple-element(%c_param), index=0
  ROOT %c_less = pred[] compare(%c_count, %c_limit), direction=LT
}

%body (b_param: (s32[], f32[16], f32[16])) -> (s32[], f32[16], f32[16]) {
  %b_param = (s32[], f32[16]{0}, f32[16]{0}) parameter(0)
  %b_one = s32[] constant(1)
  %b_count = s32[] get-tuple-element(%b_param), index=0
  %b_acc = f32[16]{0} get-tuple-element(%b_param), index=1
  %b_step = f32[16]{0} get-tuple-element(%b_param), index=2
  %b_next = s32[] add(%b_count, %b_one)
  %b_sum = f32[16]{0} add(%b_acc, %b_step)
  ROOT %b_root = (s32[], f32[16]{0}, f32[16]{0}) tuple(%b_next, %b_sum, %b_step)
}

ENTRY %main (x: f32[16]) -> f32[16] {
  %x = f32[16]{0} parameter(0)
  %zero = s32[] constant(0)
  %init_acc = f32[16]{0} negate(%x)
  %init = (s32[], f32[16]{0}, f32[16]{0}) tuple(%zero, %init_acc, %x)
  %loop = (s32[], f32[16]{0}, f32[16]{0}) while(%init), condition=%cond, body=%body
  %result = f32[16]{0} get-tuple-element(%loop), index=1
  ROOT %doubled = f32[16]{0} add(%result, %result)
}
"""

COST_HLO = """
HloModule cost_test, is_scheduled=true

%fused_scale (q0: f32[3,4,6]) -> f32[3,4,6] {
  %q0 = f32[3,4,6]{2,1,0} parameter(0)
  %two = f32[] constant(2)
  %twos = f32[3,4,6]{2,1,0} broadcast(%two), dimensions={}
  %scaled = f32[3,4,6]{2,1,0} multiply(%q0, %twos)
  ROOT %shifted = f32[3,4,6]{2,1,0} add(%scaled, %q0)
}

%sum (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %ab = f32[] add(%a, %b)
}

ENTRY %main (img: f32[2,8,8,4], kernel: f32[3,3,4,16], grouped: f32[3,3,2,16], lhs: f32[3,4,5], rhs: f32[3,5,6], buf: f32[8], piece: f32[2], at: s32[]) -> f32[] {
  %img = f32[2,8,8,4]{3,2,1,0} parameter(0)
  %kernel = f32[3,3,4,16]{3,2,1,0} parameter(1)
  %grouped = f32[3,3,2,16]{3,2,1,0} parameter(2)
  %lhs = f32[3,4,5]{2,1,0} parameter(3)
  %rhs = f32[3,5,6]{2,1,0} parameter(4)
  %buf = f32[8]{0} parameter(5)
  %piece = f32[2]{0} parameter(6)
  %at = s32[] parameter(7)
  %zero = f32[] constant(0)
  %conv = f32[2,8,8,16]{3,2,1,0} convolution(%img, %kernel), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
  %gconv = f32[2,8,8,16]{3,2,1,0} convolution(%img, %grouped), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, feature_group_count=2
  %bdot = f32[3,4,6]{2,1,0} dot(%lhs, %rhs), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
  %fused = f32[3,4,6]{2,1,0} fusion(%bdot), kind=kLoop, calls=%fused_scale
  %total = f32[] reduce(%fused, %zero), dimensions={0,1,2}, to_apply=%sum
  %fresh = f32[8]{0} negate(%buf)
  %updated = f32[8]{0} dynamic-update-slice(%fresh, %piece, %at)
  %last = f32[] reduce(%updated, %zero), dimensions={0}, to_apply=%sum
  ROOT %both = f32[] add(%total, %last)
}
"""


COND_HLO = """
HloModule cond_test, is_scheduled=true

%take_first (t: (f32[16])) -> (f32[16], f32[16]) {
  %t = (f32[16]{0}) parameter(0)
  %t_a = f32[16]{0} get-tuple-element(%t), index=0
  %t_new = f32[16]{0} exponential(%t_a)
  ROOT %t_out = (f32[16]{0}, f32[16]{0}) tuple(%t_new, %t_a)
}

%take_both (f: (f32[16], f32[16])) -> (f32[16], f32[16]) {
  %f = (f32[16]{0}, f32[16]{0}) parameter(0)
  %f_a = f32[16]{0} get-tuple-element(%f), index=0
  %f_x = f32[16]{0} get-tuple-element(%f), index=1
  %f_new = f32[16]{0} add(%f_a, %f_x)
  ROOT %f_out = (f32[16]{0}, f32[16]{0}) tuple(%f_new, %f_a)
}

ENTRY %main (x: f32[16], p: pred[]) -> f32[16] {
  %x = f32[16]{0} parameter(0)
  %p = pred[] parameter(1)
  %a = f32[16]{0} negate(%x)
  %to_true = (f32[16]{0}) tuple(%a)
  %to_false = (f32[16]{0}, f32[16]{0}) tuple(%a, %x)
  %c = (f32[16]{0}, f32[16]{0}) conditional(%p, %to_true, %to_false), true_computation=%take_first, false_computation=%take_both
  %c0 = f32[16]{0} get-tuple-element(%c), index=0
  %c1 = f32[16]{0} get-tuple-element(%c), index=1
  ROOT %sum = f32[16]{0} add(%c0, %c1)
}
"""


def test_a_value_every_branch_passes_through_flows_on_and_the_others_are_fresh_and_aliased():
    module = hlo.parse_module(COND_HLO)
    dataflow = hlo.analyze(module)
    assert dataflow.value_sets["c"][(1,)] == ("a", ())  # both branches return %a unchanged: no new value
    assert dataflow.value_sets["c"][(0,)] == ("c", (0,))  # the branches differ: a fresh value...
    group = next(g for g in dataflow.alias_groups if ("c", (0,)) in g)
    assert group == {("c", (0,)), ("t_new", ()), ("f_new", ())}  # ...sharing memory with both branch roots
    workload, _, tensor_of = workload_of(COND_HLO)
    sum_step = next(i for i in workload.instructions if i.name == "sum")
    assert sum_step.operands == (tensor_of[("c", (0,))], tensor_of[("a", ())])


def workload_of(text: str) -> tuple[Workload, hlo.HloModule, dict]:
    module = hlo.parse_module(text)
    record = hlo.to_workload(module, module.name, "", "test")
    workload = Workload.from_json(json.loads(json.dumps(record)))
    check(workload)
    dataflow = hlo.analyze(module)
    tensor_of = {value: number for number, value in
                 enumerate(hlo.tensor_order(hlo.game_steps(module, dataflow)))}
    return workload, module, tensor_of


def buffer_rows(workload: Workload) -> list[tuple]:
    return [(b.target_time, b.tensor_id, b.is_output, b.size, b.alias_id, b.live_range) for b in workload.buffers]


def test_tuple_leaves_are_tensors_and_get_tuple_element_aliases_its_operand():
    workload, _, tensor_of = workload_of(TUPLE_HLO)
    assert [(i.name, i.operands, i.outputs) for i in workload.instructions] == [
        ("pair_fusion", (0,), (1, 2)), ("square", (1,), (3,)), ("dot", (3, 4), (5,)), ("sum", (2, 3), (6,))]
    assert tensor_of[("pair_fusion", (0,))] == 1 and tensor_of[("pair_fusion", (1,))] == 2
    assert ("pair_fusion", ()) not in tensor_of  # the tuple itself is no tensor


def test_buffers_are_chronological_operands_first_distinct_with_donation_aliasing():
    workload, _, _ = workload_of(TUPLE_HLO)
    x_, pair0, pair1, square, w, dot, total = range(7)
    small, big = 4 * 8 * 4, 8 * 16 * 4
    assert buffer_rows(workload) == [
        (0, x_, False, small, 0, (0, 0)),  # donated: x lives until its last use, then `sum` takes its memory
        (0, pair0, True, small, None, (0, 1)),
        (0, pair1, True, small, None, (0, 3)),
        (1, pair0, False, small, None, (0, 1)),  # multiply(a, a): one buffer
        (1, square, True, small, None, (1, 3)),
        (2, square, False, small, None, (1, 3)),
        (2, w, False, big, None, (0, 3)),  # read-only parameter: live from 0 to the end
        (2, dot, True, 4 * 16 * 4, None, (2, 3)),  # entry output: live to the end
        (3, pair1, False, small, None, (0, 3)),
        (3, square, False, small, None, (1, 3)),
        (3, total, True, small, 0, (3, 3)),
    ]


def test_while_loop_carried_values_form_alias_groups_and_pass_through_values_stay_one_tensor():
    workload, module, tensor_of = workload_of(WHILE_HLO)
    dataflow = hlo.analyze(module)
    assert [inst.name for inst in dataflow.sequence] == [
        "x", "zero", "init_acc", "init", "c_param", "c_limit", "c_count", "c_less", "b_param", "b_one",
        "b_count", "b_acc", "b_step", "b_next", "b_sum", "b_root", "loop", "result", "doubled"]
    assert [i.name for i in workload.instructions] == ["init_acc", "c_less", "b_next", "b_sum", "doubled"]
    alias = {b.tensor_id: b.alias_id for b in workload.buffers}
    accumulator = [tensor_of[v] for v in [("init_acc", ()), ("b_param", (1,)), ("b_sum", ()), ("loop", (1,))]]
    counter = [tensor_of[v] for v in [("c_param", (0,)), ("b_param", (0,)), ("b_next", ())]]
    assert len({alias[t] for t in accumulator}) == 1 and alias[accumulator[0]] is not None
    assert len({alias[t] for t in counter}) == 1 and alias[counter[0]] not in (None, alias[accumulator[0]])
    # element 2 is passed through unchanged: the body reads x itself, no phi value
    assert workload.instructions[3].operands == (tensor_of[("b_param", (1,))], tensor_of[("x", ())])
    assert ("b_param", (2,)) not in tensor_of
    ranges = {b.tensor_id: b.live_range for b in workload.buffers}
    assert ranges[tensor_of[("x", ())]] == (0, 4)
    assert ranges[tensor_of[("init_acc", ())]] == (0, 0)  # ends where the loop's condition takes over
    assert ranges[tensor_of[("b_sum", ())]] == (3, 3)  # body root: to the end of the body
    assert ranges[tensor_of[("loop", (1,))]] == (4, 4)


def test_flops_of_dot_convolution_fusion_and_reduce_are_hand_derived():
    workload, _, _ = workload_of(COST_HLO)
    flops = {i.name: i.flops for i in workload.instructions}
    assert flops["conv"] == 2 * (2 * 8 * 8 * 16) * (3 * 3) * 4
    assert flops["gconv"] == 2 * (2 * 8 * 8 * 16) * (3 * 3) * 2  # feature groups of 2 input features
    assert flops["bdot"] == 2 * 3 * 4 * 6 * 5  # 2 * batch * M * N * K
    assert flops["fused"] == 2 * 3 * 4 * 6  # multiply + add; broadcast and constants are free
    assert flops["total"] == 3 * 4 * 6 and flops["last"] == 8
    assert flops["updated"] == 0.0


def test_in_place_dynamic_update_slice_aliases_its_operand():
    workload, _, tensor_of = workload_of(COST_HLO)
    alias = {b.tensor_id: b.alias_id for b in workload.buffers}
    fresh, updated = tensor_of[("fresh", ())], tensor_of[("updated", ())]
    assert alias[fresh] is not None and alias[fresh] == alias[updated]
    assert sum(a is not None for a in alias.values()) == 2


def test_parser_rejects_what_it_cannot_model():
    with pytest.raises(hlo.HloParseError, match="as_text"):
        hlo.parse_instruction("  %t = f32[2]{0} add(%p#0, %p#1)")
    with pytest.raises(hlo.HloParseError, match="ENTRY"):
        hlo.parse_module("HloModule empty\n")


# ------------------------------------------------------------------------------------ committed workloads


def test_every_program_has_a_committed_workload():
    assert list_workloads() == sorted(ALL_PROGRAMS)
    assert len(ALL_PROGRAMS) >= 30


@pytest.mark.parametrize("name", sorted(ALL_PROGRAMS))
def test_committed_workload_loads_and_keeps_the_invariants(name):
    workload = load_workload(name)
    check(workload)
    assert workload.name == name and workload.description
    assert 100 <= workload.num_buffers <= 20_000
    assert workload.live_range.shape == (workload.num_buffers, 2)
    assert not workload.size.flags.writeable


def test_workload_sizes_span_a_wide_range():
    counts = [load_workload(name).num_buffers for name in list_workloads()]
    assert min(counts) < 200 and max(counts) >= 10_000


def test_unknown_workload_names_the_valid_ones():
    with pytest.raises(ValueError, match="valid names: .*mlp_sgd"):
        load_workload("no_such_workload")


def test_check_catches_a_broken_live_range():
    record = json.loads((DATA_DIR / "mlp_sgd.json").read_text())
    record["buffers"][5]["live_range"] = [record["buffers"][5]["target_time"] + 1] * 2
    with pytest.raises(ValueError, match="outside live_range"):
        check(Workload.from_json(record))


def test_loading_a_workload_does_not_import_jax():
    code = ("import sys; from algorithms.mmap.workloads import load_workload; "
            "load_workload('mlp_sgd'); assert 'jax' not in sys.modules, 'jax was imported'")
    subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, check=True)


def test_regenerating_a_workload_reproduces_the_committed_file():
    committed = json.loads((DATA_DIR / "mlp_sgd.json").read_text())
    if committed["jax_version"] != jax.__version__:
        pytest.skip(f"committed with jax {committed['jax_version']}, running {jax.__version__}")
    assert generate.dumps(generate.workload_record(PROGRAMS["mlp_sgd"]())) == (DATA_DIR / "mlp_sgd.json").read_text()
