"""An array a jitted function returned (a `jitad.Array`, an ndarray subclass) passed back
in, as a training loop does with its parameters, reaches the compiled code as a view of
its memory, not a copy; a strided or mistyped array is still copied."""
import numpy as np

import jitad
from jitad.ir.types import Type
from jitad.lower.compile import _canonical


class _Sub(np.ndarray):
    pass


def test_returned_arrays_are_passed_back_without_a_copy():
    f = jitad.jit(lambda w: w * 2.0)
    w = f(np.ones((3, 4), np.float32))
    assert isinstance(w, np.ndarray) and type(w) is not np.ndarray
    assert _canonical(w, Type("f32", (3, 4))) is w   # the entry takes jitad's Array as an ndarray
    view = _canonical(w.view(_Sub), Type("f32", (3, 4)))   # another subclass:
    assert type(view) is np.ndarray and np.shares_memory(view, w)                 # a plain view
    np.testing.assert_array_equal(f(w), np.full((3, 4), 4.0, np.float32))


def test_strided_or_other_dtype_arrays_are_copied():
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    for arg, t in ((x[:, ::2], Type("f32", (4, 3))), (x.astype(np.float64), Type("f32", (4, 6)))):
        out = _canonical(arg, t)
        assert type(out) is np.ndarray and out.flags.c_contiguous and out.dtype == np.float32
        assert not np.shares_memory(out, x)


def test_a_step_fed_its_own_results_keeps_every_argument_and_its_dict_order():
    """Results passed back (jitad Arrays in dicts, built in another key order) beside an
    argument that must be converted (int32 indices): the arguments that need no change are
    passed as they are, and each dict is read by key."""
    @jitad.jit
    def step(p, idx):
        return {k: w + idx.sum() for k, w in p.items()}, idx * 2

    p = {"b": np.ones(3, np.float32), "a": np.zeros(2, np.float32)}
    idx = np.arange(3, dtype=np.int32)
    for _ in range(3):
        p, twice = step(dict(reversed(list(p.items()))), idx)
    np.testing.assert_array_equal(p["a"], np.full(2, 9.0, np.float32))
    np.testing.assert_array_equal(p["b"], np.full(3, 10.0, np.float32))
    np.testing.assert_array_equal(twice, [0, 2, 4])
