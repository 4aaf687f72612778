#!/usr/bin/env python3
"""An ImageFolder DataLoader with tensorcom.imaging's transforms in place of
torchvision's PIL ones: the data-loading half of a training loop.

Only two lines change from the usual torchvision code: the transforms come
from tensorcom.imaging, and ImageFolder's loader hands them the file's bytes
(imaging.read_bytes) instead of a PIL image; the DataLoader stays as it was.
--shared-collate adds a third: the DataLoader's collate_fn becomes
tensorcom.collate.SharedRingCollate(), which hands batches to the main
process in shared memory reused from batch to batch (the default collate
faults in fresh pages for each: a cost as large as decoding where page
faults are dear).
The transforms end in PILToTensor, so batches are uint8 (N, 3, 224, 224):
a quarter of the bytes of ToTensor's floats through the workers' queues and
to the GPU. They are converted to float and normalised after collation, on
the GPU when there is one (else on the CPU), as train.py does.

    PYTHONPATH=build/bindings examples/pytorch/imagefolder_transforms.py DIR \\
        [--val] [--workers 4] [--batch-size 256] [--epochs 1] [--limit 50] [--shared-collate] [--torchvision] \\
        [--model]

DIR is an ImageFolder tree (DIR/CLASS/IMAGE.jpg). --val uses the validation
transforms (Resize(256) + CenterCrop(224)) instead of the training ones
(RandomResizedCrop(224) + RandomHorizontalFlip); --limit stops each epoch
after that many batches; --torchvision runs the same loop with torchvision's
original PIL transforms, to compare images/s; --model adds a forward and
backward pass of a tiny network, to show where the batch goes next.
Each epoch prints its images/s, counted from the first batch on (the
workers' start-up is reported apart), and the share of that time the loop
waited for the DataLoader: near 0%, the loading keeps up with the rest of
the loop (here: the normalisation, and the model with --model).
"""

import argparse

import torch
import torchvision
from torchvision import transforms as T

from loader_loop import Normalize, collate_fn, run_epoch


def tensorcom_transforms(val):
    """tensorcom.imaging's transforms: they take the encoded bytes."""
    from tensorcom import imaging

    if val:
        return imaging.Compose([imaging.Resize(256), imaging.CenterCrop(224), imaging.PILToTensor()])
    return imaging.Compose([imaging.RandomResizedCrop(224), imaging.RandomHorizontalFlip(), imaging.PILToTensor()])


def torchvision_transforms(val):
    """The torchvision original, on PIL images. The classic recipe ends in
    T.ToTensor() and T.Normalize(mean, std): float images made in the
    workers. Here it ends in PILToTensor, to compare like with like (uint8
    batches, normalised after collation)."""
    if val:
        return T.Compose([T.Resize(256), T.CenterCrop(224), T.PILToTensor()])
    return T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.PILToTensor()])


def make_dataset(root, val, use_torchvision):
    if use_torchvision:
        # The original:
        #   ImageFolder(root, transform=T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(),
        #                                          T.ToTensor(), T.Normalize(mean, std)]))
        # (ImageFolder's default loader opens the file with PIL and converts it to RGB.)
        return torchvision.datasets.ImageFolder(root, transform=torchvision_transforms(val))
    from tensorcom import imaging

    # The same with tensorcom.imaging: the loader returns the file's bytes, and
    # the transforms decode only the pixels their output needs. ImageFolder
    # also lists .tif files, which tensorcom.imaging does not read (ImageError):
    # pass is_valid_file to leave them out if a tree has any.
    return torchvision.datasets.ImageFolder(root, transform=tensorcom_transforms(val), loader=imaging.read_bytes)


def tiny_model(classes, device):
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, kernel_size=7, stride=4), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(), torch.nn.Linear(16, classes)).to(device)


def parse_args():
    description, details = __doc__.split("\n\n", 1)
    p = argparse.ArgumentParser(description=description, epilog=details,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("root", help="ImageFolder tree: ROOT/CLASS/IMAGE")
    p.add_argument("--val", action="store_true", help="validation transforms (Resize + CenterCrop)")
    p.add_argument("--workers", type=int, default=4, help="DataLoader worker processes")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--limit", type=int, default=0, help="batches per epoch (0: all)")
    p.add_argument("--shared-collate", action="store_true",
                   help="collate_fn=tensorcom.collate.SharedRingCollate(): batches through reused shared memory")
    p.add_argument("--torchvision", action="store_true", help="torchvision's PIL transforms, to compare")
    p.add_argument("--model", action="store_true", help="a training step of a tiny network on each batch")
    return p.parse_args()


def main():
    args = parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dataset = make_dataset(args.root, args.val, args.torchvision)
    loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch_size, shuffle=not args.val,
                                         num_workers=args.workers, pin_memory=device.type == "cuda",
                                         drop_last=not args.val, persistent_workers=args.workers > 0,
                                         collate_fn=collate_fn(args.shared_collate))
    normalize = Normalize(device)
    model = tiny_model(len(dataset.classes), device) if args.model else None
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01) if model is not None else None
    which = "torchvision (PIL)" if args.torchvision else "tensorcom.imaging"
    print(f"{len(dataset)} images in {len(dataset.classes)} classes; {which} "
          f"{'validation' if args.val else 'training'} transforms, {args.workers} workers, "
          f"batches of {args.batch_size} ({'SharedRingCollate' if args.shared_collate else 'default collate'}), "
          f"normalised on {device}")

    def train_step(inputs, labels):
        loss = torch.nn.functional.cross_entropy(model(inputs), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.item()

    for epoch in range(args.epochs):
        run_epoch(epoch, loader, normalize, args.limit, train_step if model is not None else None)


if __name__ == "__main__":
    main()
