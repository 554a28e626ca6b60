# source: https://github.com/jax-ml/jax/blob/cec06d116c05f0d52adfceee3d3b730fdbcb0ce5/docs/pytrees.md
# ruff: noqa (kept as its authors wrote it)
# licence: Apache-2.0, Copyright the JAX Authors (JAX's documentation; full text: jax/LICENSE)
# edits: the page's code cells in order; a cell shown raising an error in try/except Exception; IPython % lines cut; plotting cut
# compare: params rtol=1e-9 atol=1e-12
# x64: on (it draws JAX's random numbers, 64-bit: its 32-bit types need float32 defaults jitad lacks yet)
# Copyright the JAX Authors (JAX documentation).

# This ensures that code cell tracebacks appearing below will be concise.

import jitad
import jitad.numpy as jnp

example_trees = [
    [1, 'a', object()],
    (1, (2, 3), ()),
    [1, {'k1': 2, 'k2': (3, 4)}, 5],
    {'a': 2, 'b': (2, 3)},
    jnp.array([1, 2, 3]),
]

# Print how many leaves the pytrees have.
for pytree in example_trees:
  # This `jitad.tree.leaves()` method extracts the flattened leaves from the pytrees.
  leaves = jitad.tree.leaves(pytree)
  print(f"{repr(pytree):<45} has {len(leaves)} leaves: {leaves}")

list_of_lists = [
    [1, 2, 3],
    [1, 2],
    [1, 2, 3, 4]
]

jitad.tree.map(lambda x: x*2, list_of_lists)

another_list_of_lists = list_of_lists
jitad.tree.map(lambda x, y: x+y, list_of_lists, another_list_of_lists)

import numpy as np

def init_mlp_params(layer_widths):
  params = []
  for n_in, n_out in zip(layer_widths[:-1], layer_widths[1:]):
    params.append(
        dict(weights=np.random.normal(size=(n_in, n_out)) * np.sqrt(2/n_in),
             biases=np.ones(shape=(n_out,))
            )
    )
  return params

params = init_mlp_params([1, 128, 128, 1])

jitad.tree.map(lambda x: x.shape, params)

# Define the forward pass.
def forward(params, x):
  *hidden, last = params
  for layer in hidden:
    x = jitad.nn.relu(x @ layer['weights'] + layer['biases'])
  return x @ last['weights'] + last['biases']

# Define the loss function.
def loss_fn(params, x, y):
  return jnp.mean((forward(params, x) - y) ** 2)

# Set the learning rate.
LEARNING_RATE = 0.0001

# Using the stochastic gradient descent, define the parameter update function.
# Apply `@jitad.jit` for JIT compilation (speed).
@jitad.jit
def update(params, x, y):
  # Calculate the gradients with `jitad.grad`.
  grads = jitad.grad(loss_fn)(params, x, y)
  # Note that `grads` is a pytree with the same structure as `params`.
  # `jitad.grad` is one of many JAX functions that has
  # built-in support for pytrees.
  # This is useful - you can apply the SGD update using JAX pytree utilities.
  return jitad.tree.map(
      lambda p, g: p - LEARNING_RATE * g, params, grads
  )

from jitad.tree_util import tree_structure
print(tree_structure(object))

import collections

ATuple = collections.namedtuple("ATuple", ('name'))

tree = [1, {'k1': 2, 'k2': (3, 4)}, ATuple('foo')]
flattened, _ = jitad.tree_util.tree_flatten_with_path(tree)

for key_path, value in flattened:
  print(f'Value of tree{jitad.tree_util.keystr(key_path)}: {value}')

for key_path, _ in flattened:
  print(f'Key path of tree{jitad.tree_util.keystr(key_path)}: {repr(key_path)}')

a_tree = [jnp.zeros((2, 3)), jnp.zeros((3, 4))]

# Try to make another pytree with ones instead of zeros.
shapes = jitad.tree.map(lambda x: x.shape, a_tree)
jitad.tree.map(jnp.ones, shapes)

jitad.tree.leaves([None, None, None])

jitad.tree.leaves([None, None, None], is_leaf=lambda x: x is None)

try:
    jitad.tree.map(lambda x: x + 1, {1: 7, "y": 42})
except Exception as e:
    print(type(e).__name__, e)

def tree_transpose(list_of_trees):
  """
  Converts a list of trees of identical structure into a single tree of lists.
  """
  return jitad.tree.map(lambda *xs: list(xs), *list_of_trees)

# Convert a dataset from row-major to column-major.
episode_steps = [dict(t=1, obs=3), dict(t=2, obs=4)]
tree_transpose(episode_steps)

jitad.tree.transpose(
  outer_treedef = jitad.tree.structure([0 for e in episode_steps]),
  inner_treedef = jitad.tree.structure(episode_steps[0]),
  pytree_to_transpose = episode_steps
)
