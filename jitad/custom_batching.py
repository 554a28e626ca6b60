"""JAX's `jax.custom_batching`: `sequential_vmap` (JAX runs it once per lane under
`vmap`; jitad batches it as any function, which gives the same values).

>>> f = jitad.custom_batching.sequential_vmap(lambda x: x * 2.0)
>>> jitad.vmap(f)(np.arange(3.0))
Array([0., 2., 4.])
"""
import functools

__all__ = ["sequential_vmap"]


def sequential_vmap(f):
    """`f` as a function `vmap` may batch: its values are those of a loop over the lanes."""
    @functools.wraps(f)
    def per_lane(*args):
        return f(*args)
    return per_lane
