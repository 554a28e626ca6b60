"""Stands in for autograd's `examples/data.py` (MIT, HIPS autograd): `load_mnist` reads the
synthetic `data_mnist` beside it (same shapes and dtypes as MNIST's, fewer images), `save_images`
draws nothing (plotting is cut from the corpus), and `make_pinwheel` is the original's
computation on NumPy arrays (its seeded draws are the same)."""
import numpy as np
import numpy.random as npr

from . import data_mnist


def load_mnist():
    """(N_data, train_images, train_labels, test_images, test_labels): images flattened to 784
    floats in [0, 1], labels one-hot over 10 classes.

    >>> N_data, train_images, train_labels, _, _ = load_mnist()
    >>> N_data, train_images.shape, train_labels.shape
    (120, (120, 784), (120, 10))
    """
    partial_flatten = lambda x: np.reshape(x, (x.shape[0], np.prod(x.shape[1:])))
    one_hot = lambda x, k: np.array(x[:, None] == np.arange(k)[None, :], dtype=int)
    train_images, train_labels, test_images, test_labels = data_mnist.mnist()
    train_images = partial_flatten(train_images) / 255.0
    test_images = partial_flatten(test_images) / 255.0
    train_labels = one_hot(train_labels, 10)
    test_labels = one_hot(test_labels, 10)
    N_data = train_images.shape[0]
    return N_data, train_images, train_labels, test_images, test_labels


def save_images(images, filename, **kwargs):
    """The original plots the images into `filename`; the corpus draws nothing."""


def make_pinwheel(radial_std, tangential_std, num_classes, num_per_class, rate, rs=None):
    """Points on `num_classes` spiral arms (based on code by Ryan P. Adams).

    >>> make_pinwheel(0.3, 0.05, 3, 4, 0.4).shape
    (12, 2)
    """
    rs = rs if rs is not None else npr.RandomState(0)
    rads = np.linspace(0, 2 * np.pi, num_classes, endpoint=False)

    features = rs.randn(num_classes * num_per_class, 2) * np.array([radial_std, tangential_std])
    features[:, 0] += 1
    labels = np.repeat(np.arange(num_classes), num_per_class)

    angles = rads[labels] + rate * np.exp(features[:, 0])
    rotations = np.stack([np.cos(angles), -np.sin(angles), np.sin(angles), np.cos(angles)])
    rotations = np.reshape(rotations.T, (-1, 2, 2))

    return np.einsum("ti,tij->tj", features, rotations)
