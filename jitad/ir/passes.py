"""The passes between tracing (differentiation included) and lowering, in order. Each
rewrites a program in place; under `JITAD_VERIFY=1` (the tests) the verifier checks
the program before the first and after every pass."""
import contextlib

from . import peephole, placed, regions
from .column_products import column_products
from .cse import eliminate_common_subexpressions, fold_constants
from .float_checks import insert_checks
from .dce import drop_unread_slots, eliminate_dead_code, forward_stop_gradients
from .fuse import column_sums, fuse_graph, row_reductions, small_products
from .gathered_reads import apart_reads, gathered_reads
from .inline import inline_small_calls
from .last_adds import last_adds_program
from .last_step import drop_dead_last_steps
from .loop_invariants import hoist_loop_invariants
from .ops import Op
from .printer import program_key_text
from .prune import drop_unread_tables
from .reshaped_ops import scalar_ops_before_reshapes
from .rows import row_loops
from .shared_products import shared_small_products
from .slots import promote_scalar_slots
from .strided import strided_products
from .tiled_concats import tiled_concats
from .triangles import triangle_products
from .verify import VerifyError, verify


def _each_graph(rewrite):
    def run(program):
        for graph in [f.body for f in program.funs] + [program.main]:
            rewrite(graph)
    return run


def _nested(rewrite):
    """A pass running `rewrite(nodes, outputs) -> nodes` on every graph and sub-graph
    (not into the scalar bodies of fused loops)."""
    def on(graph):
        for node in graph.nodes:
            for body in node.bodies if node.op != Op.FUSED else ():
                on(body)
        graph.nodes = rewrite(graph.nodes, graph.outputs)
    return _each_graph(on)


PIPELINE = [   # (name, pass(program), purpose)
    ("stop_gradients", _each_graph(forward_stop_gradients),
     "after differentiation `stop_gradient` is the identity: its users read its input"),
    ("inline_small_calls", inline_small_calls,
     "a call of a small straight-line function (a custom rule's primal: `lax.rsqrt`) is its body, which fusion "
     "merges with the work around it (LLVM only)"),
    ("scalar_slots", _each_graph(promote_scalar_slots),
     "a scalar slot (a cotangent's sum) that only reads and writes in its own graph touch is its SSA values"),
    ("fold_constants", _each_graph(fold_constants),
     "scalar float arithmetic on constants (a gradient's seed through constant factors) is its constant"),
    ("cse", _each_graph(eliminate_common_subexpressions),
     "a pure node repeating an earlier one's work (a max's tie mask in each use of its VJP) reads its result"),
    ("masked_row_adds", _nested(peephole.masked_row_adds),
     "a one-hot product's row additions skip labels outside the rows themselves: no mask over the cotangent "
     "(LLVM only)"),
    ("batched_products", _nested(peephole.batched_products),
     "a batched product with a matrix broadcast to every lane (vmap's shared weights) is one GEMM; "
     "one over a single term (per-lane outer products) an elementwise `mul`"),
    ("tiled_concats", _nested(tiled_concats),
     "a concatenation of slices that lay one tensor out again whole (a Jacobian's blocks joined) is that tensor"),
    ("dead_code", _each_graph(eliminate_dead_code), "drop pure nodes whose results nothing reads"),
    ("unread_slots", _nested(drop_unread_slots),
     "drop slots only written (a value whose gradient alone is returned), and their writes"),
    ("unread_tables", drop_unread_tables, "drop the loop tables nothing reads, and their writes"),
    ("dead_code", _each_graph(eliminate_dead_code), "drop the values only those slots and tables kept"),
    ("dead_last_steps", _nested(drop_dead_last_steps),
     "a FOR whose results nothing reads stops before a last step that only makes what nothing reads (the "
     "state reverse mode keeps as the last step leaves it)"),
    ("loop_invariants", _nested(hoist_loop_invariants),
     "work in a FOR body that reads only captured values (a step's slices of its weights) runs once, before "
     "the loop"),
    ("float_checks", insert_checks,
     "jax_debug_nans / jax_debug_infs on: each float result of a primitive is checked (off: nothing changes)"),
    ("scalar_ops_before_reshapes", _nested(scalar_ops_before_reshapes),
     "an elementwise op of a reshaped tensor and scalars runs before the reshape, where fusion can merge it"),
    ("triangle_products", _nested(triangle_products),
     "a batched product whose left operand is zero above a diagonal (a causal softmax, its masked cotangent), "
     "or whose result is read only below one (masked scores), is marked so: the tiles skip the rest (LLVM only)"),
    ("fuse", _each_graph(fuse_graph), "runs of elementwise work on tensors become one fused loop"),
    ("row_reductions", _nested(row_reductions),
     "a sum or max over the last axis of a fused result is taken in that loop, which stores the result "
     "only if something else reads it (LLVM only)"),
    ("recompute_cheap", _nested(peephole.recompute_cheap),
     "a cheap fused result read only by later fused loops is recomputed there, not stored"),
    ("small_products", _nested(small_products),
     "a matrix product over a short contraction that one fused loop reads is computed in that loop (LLVM only)"),
    ("merge_slot_loops", _nested(peephole.merge_slot_loops),
     "a fused loop writing a tensor slot and the next loop of its shape reading it run as one loop (LLVM only)"),
    ("shared_small_products", _nested(shared_small_products),
     "a short product several fused loops read is computed in each of them, not stored (LLVM only)"),
    ("localize_slots", _nested(peephole.localize_slots),
     "a tensor slot only one fused loop uses becomes a register in it"),
    ("first_adds_store", _nested(peephole.first_adds_store),
     "a tensor slot's first addition stores: no zero fill"),
    ("forward_single_stores", _nested(peephole.forward_single_stores),
     "a tensor slot set once and then read: its reads are the stored value"),
    ("indexed_reads", _nested(regions.indexed_reads),
     "a slice or concatenation made only for a fused loop is read through its index map there (LLVM only)"),
    ("gathered_reads", _nested(gathered_reads),
     "rows taken by a gather only fused loops read are read through the row index there (LLVM only)"),
    ("region_adds", _nested(regions.region_adds),
     "a fused result whose slice is only added to a region of a slot is added there from the loop (LLVM only)"),
    ("recompute_shifted", regions.recompute_shifted_program,
     "a cheap fused result later fused loops read shifted is recomputed in them at the shifted index (LLVM only)"),
    ("concat_in_place", _nested(placed.concat_in_place),
     "the fused loops making a concatenation's pieces store them into it (LLVM only)"),
    ("forward_slot_copies", _nested(peephole.forward_slot_copies),
     "a tensor slot set to another slot's value (whole, reshaped, or by a fused loop) and then only read: its "
     "reads read that slot"),
    ("column_products", _nested(column_products),
     "a slot one fused loop stores whole and only column sums or products A^T @ it with a short A read "
     "is reduced in that loop, not stored (LLVM only)"),
    ("column_sums", _nested(column_sums),
     "a sum over every axis but the last of a fused result (a bias's gradient) is added up in that loop "
     "(LLVM only)"),
    ("region_stores", _nested(regions.region_stores),
     "a slot first written by a fused loop's region add (a shift's adjoint) is stored there and zeroed only "
     "outside the region (LLVM only)"),
    ("last_adds", last_adds_program,
     "the last fused loop touching a slot that only adds to it and reads it back adds in a register: nothing "
     "reads the sum after it, so it is not stored (LLVM only)"),
    ("bias_epilogues", _nested(peephole.bias_epilogues),
     "a matrix product only read by a bias add starts its rows from the bias (LLVM only)"),
    ("strided_products", _nested(strided_products),
     "a batched product reads its operands in place through their reshapes, transposes and slices "
     "(attention's heads), and writes its result through the transposes that alone read it (LLVM only)"),
    ("accumulate_products", _nested(peephole.accumulate_products),
     "a matrix product only added to a slot becomes `matmul_add` (BLAS beta = 1)"),
    ("shared_transposes", lambda program: peephole.shared_transposes(program.main),
     "a weight read transposed by several small products is transposed once"),
    ("apart_reads", _nested(apart_reads),
     "a fused loop reading through an index that writes none of the tensors it reads is marked so: LLVM is "
     "told its loads and stores do not alias (LLVM only)"),
    ("row_loops", _nested(row_loops),
     "fused loops of one row shape reading each other's row sums and maxima (softmax, LayerNorm) run row by "
     "row, each row read again while in L1 (LLVM only)"),
]


LLVM_ONLY = {"indexed_reads", "gathered_reads", "apart_reads", "region_adds", "recompute_shifted", "concat_in_place", "row_reductions",
             "small_products", "masked_row_adds", "merge_slot_loops",
             "shared_small_products", "strided_products", "bias_epilogues", "column_sums", "row_loops",
             "inline_small_calls", "column_products", "region_stores", "last_adds",
             "triangle_products"}   # fused bodies and attributes the CUDA kernels do not take


def run_passes(program, check=False, device="cpu"):
    """Run the pipeline on `program` (for `device`), verifying after each pass if `check`; return it."""
    if check:
        verify(program)
    for name, run, _ in PIPELINE:
        if device != "cpu" and name in LLVM_ONLY:
            continue
        run(program)
        if check:
            try:
                verify(program)
            except VerifyError as e:
                raise VerifyError(f"after pass `{name}`: {e}") from None
    return program


@contextlib.contextmanager
def counting_changes(fired):
    """Test-only (the fuzzer's pass coverage): while open, `fired[name]` counts the programs
    each pass of `PIPELINE` changed, by their exact text before and after it (its nodes,
    attributes and the bodies of fused loops); closed, the pipeline is as it was.

    >>> import collections
    >>> fired = collections.Counter()
    >>> with counting_changes(fired):
    ...     _ = jitad.jit(lambda x: jitad.numpy.tanh(x) * 2.0 + 1.0)(np.ones((4, 8)))
    >>> fired
    Counter({'fuse': 1})
    """
    original = list(PIPELINE)

    def counted(name, rewrite):
        def run(program):
            before = program_key_text(program)
            rewrite(program)
            if program_key_text(program) != before:
                fired[name] += 1
        return run
    PIPELINE[:] = [(name, counted(name, rewrite), purpose) for name, rewrite, purpose in original]
    try:
        yield fired
    finally:
        PIPELINE[:] = original
