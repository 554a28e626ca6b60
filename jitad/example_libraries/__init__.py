"""JAX's example libraries under jitad: `optimizers` (the `(init_fun, update_fun,
get_params)` triples) and `stax` (networks as `(init_fun, apply_fun)` pairs)."""
