"""Stands in for autograd's `examples/data_mnist.py`, which downloads MNIST: `mnist()` returns
arrays of MNIST's dtypes and per-image shapes (uint8 28x28 images, uint8 labels 0-9), but few of
them and made up: each digit is a fixed random stroke pattern plus seeded noise, so the same
every run and learnable."""
import numpy as np

TRAIN, TEST = 120, 40


def mnist():
    """(train_images, train_labels, test_images, test_labels), deterministic.

    >>> train_images, train_labels, _, _ = mnist()
    >>> train_images.shape, train_images.dtype, train_labels.dtype
    ((120, 28, 28), dtype('uint8'), dtype('uint8'))
    """
    rs = np.random.RandomState(0)
    prototypes = rs.rand(10, 28, 28) < 0.2
    train_images, train_labels = _digits(rs, prototypes, TRAIN)
    test_images, test_labels = _digits(rs, prototypes, TEST)
    return train_images, train_labels, test_images, test_labels


def _digits(rs, prototypes, count):
    labels = (np.arange(count) % 10).astype(np.uint8)
    rs.shuffle(labels)
    noise = rs.rand(count, 28, 28) < 0.05
    images = np.where(prototypes[labels] ^ noise, 255 - rs.randint(0, 60, (count, 28, 28)), 0)
    return images.astype(np.uint8), labels
