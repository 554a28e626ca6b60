"""Synthetic stand-in for JAX's `examples/datasets.py` (which downloads MNIST): the same
functions and the same shapes and dtypes per example (28x28 pixels as uint8 from `mnist_raw`,
784 floats in [0, 1] and one-hot float32 labels of 10 classes from `mnist`), with few
examples, drawn from a fixed seed so both runs of a program see the same numbers."""
import numpy as np

NUM_TRAIN, NUM_TEST = 256, 64


def mnist_raw():
    """Images (n, 28, 28) uint8 and labels (n,) uint8, for training and for testing."""
    rng = np.random.RandomState(0)
    train_images = rng.randint(0, 256, (NUM_TRAIN, 28, 28)).astype(np.uint8)
    train_labels = rng.randint(0, 10, NUM_TRAIN).astype(np.uint8)
    test_images = rng.randint(0, 256, (NUM_TEST, 28, 28)).astype(np.uint8)
    test_labels = rng.randint(0, 10, NUM_TEST).astype(np.uint8)
    return train_images, train_labels, test_images, test_labels


def mnist(permute_train=False):
    """Flattened images scaled to [0, 1] and one-hot labels, as the original returns them."""
    train_images, train_labels, test_images, test_labels = mnist_raw()
    train_images = train_images.reshape(NUM_TRAIN, -1) / np.float32(255.0)
    test_images = test_images.reshape(NUM_TEST, -1) / np.float32(255.0)
    train_labels = np.array(train_labels[:, None] == np.arange(10), np.float32)
    test_labels = np.array(test_labels[:, None] == np.arange(10), np.float32)
    if permute_train:
        perm = np.random.RandomState(0).permutation(NUM_TRAIN)
        train_images, train_labels = train_images[perm], train_labels[perm]
    return train_images, train_labels, test_images, test_labels
