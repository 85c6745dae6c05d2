#!/usr/bin/env python3
"""Writes tests/mlp/idx_fixtures/: one tiny dataset folder per malformed-input case of the CLI tests
(`train mlp --data FOLDER`). Only the training files are malformed; the t10k files are valid but never reached.
Run from anywhere; the files are committed, this script documents and regenerates them."""
import gzip
import os
import struct

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "idx_fixtures")


def images(count, magic=0x803, keep=None):
    body = bytes((i * 37 + 11) % 256 for i in range(count * 28 * 28))
    data = struct.pack(">IIII", magic, count, 28, 28) + body
    return data if keep is None else data[:keep]


def labels(values, magic=0x801):
    return struct.pack(">II", magic, len(values)) + bytes(values)


def write_raw(path, data):
    with open(path, "wb") as f:
        f.write(data)


def write_gzip(path, data):
    with gzip.GzipFile(path, "wb", mtime=0) as f:  # mtime 0: the same bytes on every run
        f.write(data)


def folder(name, train_images, train_labels, gzip_train=False):
    path = os.path.join(HERE, name)
    os.makedirs(path, exist_ok=True)
    for f in os.listdir(path):
        os.remove(os.path.join(path, f))
    suffix = ".gz" if gzip_train else ""
    writer = write_gzip if gzip_train else write_raw
    writer(os.path.join(path, "train-images-idx3-ubyte" + suffix), train_images)
    writer(os.path.join(path, "train-labels-idx1-ubyte" + suffix), train_labels)
    write_raw(os.path.join(path, "t10k-images-idx3-ubyte"), images(2))
    write_raw(os.path.join(path, "t10k-labels-idx1-ubyte"), labels([1, 2]))


folder("wrong_magic", images(2, magic=0x801), labels([1, 2]))
folder("truncated", images(2, keep=16 + 28 * 28 + 100), labels([1, 2]), gzip_train=True)
folder("count_mismatch", images(2), labels([1, 2, 3]))
folder("label_range", images(2), labels([1, 12]), gzip_train=True)
