"""The remainder of a vectorized loop runs as short vectors: a row of 50 doubles is six
vectors of 8 and one of 2 (not two scalar iterations, each as costly as a vector for
`tanh` or `exp`); LLVM's process-wide option is set only while jitad compiles."""
import numpy as np

import jitad
from jitad.lower import runtime


def test_a_row_remainder_is_a_short_vector_and_the_values_are_right():
    r = np.random.default_rng(5)
    x, b = r.normal(0, 2, (20, 50)), r.normal(0, 1, 50)
    f = jitad.jit(lambda x, b: jitad.tanh(x + b) + jitad.exp(0.1 * x))
    np.testing.assert_allclose(f(x, b), np.tanh(x + b) + np.exp(0.1 * x), rtol=1e-14, atol=1e-15)
    assert "vec.epilog" in str(f.llvm_ir)   # LLVM's blocks of a vectorized remainder


def test_the_option_is_set_only_while_jitad_compiles(monkeypatch):
    calls = []
    real = runtime.llvm.set_option
    monkeypatch.setattr(runtime.llvm, "set_option", lambda name, option: (calls.append(option), real(name, option)))
    jitad.jit(lambda x: jitad.tanh(x) * 1.375 + 0.8125)(np.ones((3, 50)))   # a program no other test compiles
    assert calls == [f"-epilogue-vectorization-force-VF={runtime.EPILOGUE_VF}",
                     "-epilogue-vectorization-force-VF=1"]   # LLVM's default back for other users
