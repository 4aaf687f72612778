"""The two DataLoader examples (examples/pytorch/imagefolder_transforms.py
and webdataset_transforms.py) run as a user runs them: two workers,
tensorcom's transforms with the DataLoader unchanged and with
SharedRingCollate, and torchvision's originals,
on a small ImageFolder tree and tar shards of JPEGs made here. Skipped
without torch, torchvision or PIL."""

import io
import os
import re
import subprocess
import sys
import tarfile

import pytest

pytest.importorskip("torch")
pytest.importorskip("torchvision")
Image = pytest.importorskip("PIL.Image")

from pictures import textured  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "..", "..", "examples", "pytorch")
BATCH = re.compile(r"epoch 0: (\d+) batches, .* last batch \((\d+), 3, 224, 224\) torch\.float32")


def jpeg(seed):
    buffer = io.BytesIO()
    Image.fromarray(textured(seed, 180 + seed, 260 - seed)).save(buffer, "JPEG", quality=90)
    return buffer.getvalue()


def run_example(name, *args):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([EXAMPLES] + sys.path), CUDA_VISIBLE_DEVICES="")
    out = subprocess.run([sys.executable, os.path.join(EXAMPLES, name), *args], capture_output=True, text=True,
                         timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    match = BATCH.search(out.stdout)
    assert match, out.stdout
    return int(match.group(1)), int(match.group(2))


FLAGS = [[], ["--shared-collate"], ["--torchvision"]]


@pytest.mark.parametrize("flags", FLAGS)
def test_imagefolder_example(tmp_path, flags):
    for k in range(16):
        folder = tmp_path / f"class{k % 2}"
        folder.mkdir(exist_ok=True)
        (folder / f"{k}.jpg").write_bytes(jpeg(k))
    assert run_example("imagefolder_transforms.py", str(tmp_path), "--workers", "2", "--batch-size", "4",
                       *flags) == (4, 4)


@pytest.mark.parametrize("flags", FLAGS)
def test_webdataset_example(tmp_path, flags):
    for shard in range(2):
        with tarfile.open(tmp_path / f"shard-{shard:06d}.tar", "w") as tar:
            for k in range(6):
                for extension, data in (("jpg", jpeg(10 * shard + k)), ("cls", str(k % 3).encode())):
                    member = tarfile.TarInfo(f"{k:04d}.{extension}")
                    member.size = len(data)
                    tar.addfile(member, io.BytesIO(data))
    shards = str(tmp_path / "shard-{000000..000001}.tar")
    # 12 samples in batches of 5 from each worker's shard: 5 and 1 from each.
    batches, last = run_example("webdataset_transforms.py", shards, "--workers", "2", "--batch-size", "5", *flags)
    assert batches == 4 and last in (1, 5)
