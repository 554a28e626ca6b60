"""JAX's `jax.checkpoint_policies`: which values a checkpointed function keeps for the
backward pass. jitad's `checkpoint` keeps none (`nothing_saveable`) whatever the policy;
the policies are predicates a user may pass or combine, with the same values computed.

>>> jitad.checkpoint(lambda x: jitad.sin(x), policy=jitad.checkpoint_policies.nothing_saveable)(0.0)
0.0
"""
__all__ = ["checkpoint_dots", "checkpoint_dots_with_no_batch_dims", "dots_saveable",
           "dots_with_no_batch_dims_saveable", "everything_saveable", "nothing_saveable",
           "save_and_offload_only_these_names", "save_any_names_but_these", "save_anything_except_these_names",
           "save_from_both_policies", "save_only_these_names"]


def everything_saveable(*_, **__):
    """Keep every value."""
    return True


def nothing_saveable(*_, **__):
    """Keep nothing: recompute the whole function (what jitad's checkpoint does)."""
    return False


def dots_saveable(prim, *_, **__):
    """Keep the results of matrix products."""
    return getattr(prim, "name", str(prim)) in ("dot_general", "matmul", "dot")


checkpoint_dots = dots_saveable
dots_with_no_batch_dims_saveable = checkpoint_dots_with_no_batch_dims = dots_saveable


def _named(keep):
    def policy(*names):
        wanted = set(names)
        return lambda prim, *_, name=None, **__: keep(name in wanted)
    return policy


save_only_these_names = save_and_offload_only_these_names = _named(lambda hit: hit)
save_any_names_but_these = save_anything_except_these_names = _named(lambda hit: not hit)


def save_from_both_policies(policy_1, policy_2):
    """Keep what either policy keeps."""
    return lambda *args, **kwargs: policy_1(*args, **kwargs) or policy_2(*args, **kwargs)
