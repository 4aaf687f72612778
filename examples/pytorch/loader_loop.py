"""What the two DataLoader examples (imagefolder_transforms.py,
webdataset_transforms.py) share: their collate_fn, uint8 batches normalised
after collation, and an epoch loop that times the loader (the workers' start-up apart, and
the share of the time the loop waited for data)."""
import time

import torch

MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]
STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]


def collate_fn(shared):
    """The DataLoader's default collate (None), or with --shared-collate
    tensorcom's: batches through shared memory each worker reuses."""
    if not shared:
        return None
    from tensorcom.collate import SharedRingCollate

    return SharedRingCollate()


class Normalize:
    """uint8 (N, 3, H, W) batches to normalised float, on the device."""

    def __init__(self, device):
        self.device = device
        self.mean = torch.tensor(MEAN, device=device).view(1, 3, 1, 1)
        self.std = torch.tensor(STD, device=device).view(1, 3, 1, 1)

    def __call__(self, images):
        images = images.to(self.device, non_blocking=True)
        return images.float().sub_(self.mean).div_(self.std)  # in place: one float batch allocated, not three


def run_epoch(epoch, loader, normalize, limit=0, step=None):
    """One pass over loader: each batch normalised, then step(inputs, labels)
    when given (a training step; it returns a loss to report). Prints one
    line: batches, the first batch's wait, then images/s and the time spent
    waiting for data."""
    device = normalize.device
    start = ready = time.perf_counter()
    first = None
    images = batches = 0
    waited = 0.0
    loss = inputs = None
    for batch, labels in loader:
        now = time.perf_counter()
        batches += 1
        if first is None:
            first = now  # the workers' start-up ends here
        else:
            images += len(batch)
            waited += now - ready
        inputs = normalize(batch)  # float (N, 3, H, W), mean 0 and std 1 per channel
        labels = labels.to(device, non_blocking=True)
        if step is not None:
            loss = step(inputs, labels)
        if limit and batches >= limit:
            break
        ready = time.perf_counter()
    if device.type == "cuda":
        torch.cuda.synchronize()
    end = time.perf_counter()
    if first is None:
        print(f"epoch {epoch}: no batches")
        return
    rate = images / (end - first) if images else float("nan")
    print(f"epoch {epoch}: {batches} batches, first after {first - start:.2f} s, then {rate:.1f} images/s, "
          f"{waited / (end - first) if end > first else 0:.0%} of the time waiting for data, "
          f"last batch {tuple(inputs.shape)} {inputs.dtype}" + (f", loss {loss:.3f}" if loss is not None else ""))
