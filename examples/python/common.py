"""Shared by the PyTorch examples: Fashion-MNIST from its gzip IDX files (nothing is downloaded), the LeNet-style CNN
and a ResNet-18-style network, convtune or PyTorch's own convolutions (cuDNN on a GPU) under the same model,
the first-step gradient check between the two, and torchrun's distributed setup."""
import gzip
import os
import struct

import torch
import torch.nn as nn
import torch.nn.functional as F

DEFAULT_DATA = os.environ.get("CONVTUNE_DATA", "/usr/share/datasets/fashion-mnist")
# Fashion-MNIST's pixel mean and standard deviation over the training set.
MEAN, STD = 0.2860, 0.3530


def read_idx(path):
    """An IDX file (raw or .gz) as a uint8 tensor of its dimensions."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    magic = struct.unpack(">I", data[:4])[0]
    if magic >> 8 != 0x08:
        raise ValueError(f"{path}: magic number {magic:#010x} is not an unsigned-byte IDX file")
    dims = magic & 0xFF
    shape = struct.unpack(">" + "I" * dims, data[4:4 + 4 * dims])
    return torch.frombuffer(bytearray(data[4 + 4 * dims:]), dtype=torch.uint8).reshape(shape)


def find(data_dir, stem):
    for name in (stem + ".gz", stem):
        path = os.path.join(data_dir, name)
        if os.path.exists(path):
            return path
    raise FileNotFoundError(f"{os.path.join(data_dir, stem)}(.gz) not found: install Debian's dataset-fashion-mnist "
                            "or pass --data with the four IDX files")


def load(data_dir, split, limit=None, pad_to=28, device="cpu"):
    """Normalised images (N, 1, pad_to, pad_to) and labels of 'train' or 't10k', the first `limit`, on `device`."""
    images = read_idx(find(data_dir, f"{split}-images-idx3-ubyte"))
    labels = read_idx(find(data_dir, f"{split}-labels-idx1-ubyte")).long()
    if limit:
        images, labels = images[:limit], labels[:limit]
    x = (images.float().div_(255).sub_(MEAN).div_(STD)).unsqueeze(1)
    if pad_to > 28:
        border = (pad_to - 28) // 2
        x = F.pad(x, (border, pad_to - 28 - border, border, pad_to - 28 - border), value=-MEAN / STD)
    return x.to(device), labels.to(device)


class LeNet(nn.Module):
    """The CNN `convtune train cnn --arch lenet` trains: conv5x5 1->32, pool, conv5x5 32->64, pool, 3136->256->10."""

    def __init__(self, width=32):
        super().__init__()
        self.conv1 = nn.Conv2d(1, width, 5, padding=2)
        self.conv2 = nn.Conv2d(width, 2 * width, 5, padding=2)
        self.fc1 = nn.Linear(2 * width * 7 * 7, 256)
        self.fc2 = nn.Linear(256, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(torch.flatten(x, 1))))


class BasicBlock(nn.Module):
    def __init__(self, c_in, c_out, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.shortcut = nn.Sequential()
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(y)) + self.shortcut(x))


class ResNet18(nn.Module):
    """ResNet-18 for 32x32 images (the CIFAR layout: a 3x3 stem, four stages of two basic blocks, 64 to 512 channels
    at `width` 64), on Fashion-MNIST padded to 32x32."""

    def __init__(self, width=64, channels=1, classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(channels, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        blocks, c = [], width
        for stage, stride in enumerate((1, 2, 2, 2)):
            c_out = width * 2 ** stage
            blocks += [BasicBlock(c, c_out, stride), BasicBlock(c_out, c_out, 1)]
            c = c_out
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(c, classes)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def torchvision_resnet50(width=64):
    """torchvision's ResNet-50 (10 classes), for the synthetic ImageNet-sized data (--data synthetic)."""
    import torchvision
    return torchvision.models.resnet50(num_classes=10, width_per_group=width)


# name -> (class, image size); resnet50 runs on synthetic RGB images of --image-size.
MODELS = {"lenet": (LeNet, 28), "resnet18": (ResNet18, 32), "resnet50": (torchvision_resnet50, 224)}


def build(name, width, conv, device, seed, fuse=False, channels_last=False):
    """The model with PyTorch's convolutions ('torch': cuDNN on a GPU) or convtune's ('convtune', via patch(), or
    optimize() with `fuse`: Conv + BatchNorm (+ shortcut) + ReLU blocks fused where convtune fuses them)."""
    torch.manual_seed(seed)
    cls, _ = MODELS[name]
    model = cls(width).to(device)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    if conv == "convtune":
        import convtune.torch
        if fuse:  # a GraphModule sharing the model's parameters
            model = convtune.torch.optimize(model)
            report = model._convtune_optimize_report.patch
        else:
            report = convtune.torch.patch(model)
        if report.left:
            print(report)
    return model


def synthetic(count, size, device, seed, classes=10):
    """`count` random RGB images of size x size with random labels (fixed by `seed`): a stand-in for ImageNet where
    only the speed and the agreement of two runs matter; the loss falls as the network memorises them."""
    generator = torch.Generator().manual_seed(seed)
    images = torch.randn(count, 3, size, size, generator=generator)
    labels = torch.randint(0, classes, (count,), generator=generator)
    return images.to(device), labels.to(device)


def relative_error(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-30)).item()


def gradient_check(reference, model, images, labels):
    """One forward and backward of both models (same weights) on the same batch: the worst relative L2 difference
    of the loss and of any parameter's gradient, and that parameter's name."""
    model.load_state_dict(reference.state_dict())
    grads = []
    for net in (reference, model):
        net.zero_grad()
        loss = F.cross_entropy(net(images), labels)
        loss.backward()
        grads.append((loss.detach(), {n: p.grad.detach().clone() for n, p in net.named_parameters()}))
    worst, where = relative_error(grads[1][0], grads[0][0]), "loss"
    for name, g in grads[0][1].items():
        e = relative_error(grads[1][1][name], g)
        if e > worst:
            worst, where = e, name
    reference.zero_grad()
    model.zero_grad()
    return worst, where


def gradient_check_f64(reference, model, images, labels):
    """For deep networks, where two FP32 runs differ by more than their own error (batch norms over few values amplify
    rounding): both models' loss and gradients against a float64 copy of `reference`. Returns the worst relative L2
    error of each (`model`'s, `reference`'s) and where `model`'s is worst."""
    import copy
    model.load_state_dict(reference.state_dict())
    exact = copy.deepcopy(reference).double().to(memory_format=torch.contiguous_format)
    runs = []
    for net, x in ((exact, images.double()), (reference, images), (model, images)):
        net.zero_grad()
        loss = F.cross_entropy(net(x), labels)
        loss.backward()
        runs.append((loss.detach(), {n: p.grad.detach().clone() for n, p in net.named_parameters()}))
        net.zero_grad()
    worst = []
    for loss, grads in runs[1:]:
        w, where = relative_error(loss, runs[0][0]), "loss"
        for name, g in runs[0][1].items():
            e = relative_error(grads[name], g)
            if e > w:
                w, where = e, name
        worst.append((w, where))
    return worst[1][0], worst[0][0], worst[1][1]


def distributed(device_type):
    """(rank, world size, device) under torchrun: one process per GPU over NCCL, or for `device_type` 'cpu' CPU
    processes over Gloo; (0, 1, None) outside torchrun."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return 0, 1, None
    import torch.distributed as dist
    if device_type == "cpu":
        dist.init_process_group("gloo")
        return dist.get_rank(), world, torch.device("cpu")
    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    try:
        dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    except TypeError:  # PyTorch before 2.3 binds no device to the group
        dist.init_process_group("nccl")
    return dist.get_rank(), world, torch.device("cuda", local)
