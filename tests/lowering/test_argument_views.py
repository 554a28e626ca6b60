"""An array a jitted function returned (a `jitad.Array`, an ndarray subclass) passed back
in, as a training loop does with its parameters, reaches the compiled code as a view of
its memory, not a copy; a strided or mistyped array is still copied."""
import numpy as np

import jitad
from jitad.ir.types import Type
from jitad.lower.compile import _canonical


def test_returned_arrays_are_passed_back_without_a_copy():
    f = jitad.jit(lambda w: w * 2.0)
    w = f(np.ones((3, 4), np.float32))
    assert isinstance(w, np.ndarray) and type(w) is not np.ndarray
    arg = _canonical(w, Type("f32", (3, 4)))
    assert type(arg) is np.ndarray and np.shares_memory(arg, w)
    np.testing.assert_array_equal(f(w), np.full((3, 4), 4.0, np.float32))


def test_strided_or_other_dtype_arrays_are_copied():
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    for arg, t in ((x[:, ::2], Type("f32", (4, 3))), (x.astype(np.float64), Type("f32", (4, 6)))):
        out = _canonical(arg, t)
        assert type(out) is np.ndarray and out.flags.c_contiguous and out.dtype == np.float32
        assert not np.shares_memory(out, x)
