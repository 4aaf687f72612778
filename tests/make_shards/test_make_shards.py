"""make-shards: webdataset shards from synthetic images, ImageFolder trees and lists.

Environment:
  TENSORCOM_BUILD_DIR   the meson build dir (tools/make_shards/make-shards)

Shards are read back with Python's tarfile and grouped into samples with
webdataset's own rule (the key of a member is its path up to the first dot of
its base name; consecutive members with one key form a sample), so the test
needs neither webdataset nor network access. Images are decoded with cv2.
"""

import io
import json
import os
import re
import subprocess
import tarfile

import cv2
import numpy as np
import pytest

BUILD_DIR = os.environ.get("TENSORCOM_BUILD_DIR", "")
MAKE_SHARDS = os.path.join(BUILD_DIR, "tools", "make_shards", "make-shards")

if not os.access(MAKE_SHARDS, os.X_OK):
    pytest.skip(f"no make-shards binary at {MAKE_SHARDS!r} (set TENSORCOM_BUILD_DIR)", allow_module_level=True)

PROC_TIMEOUT_S = 120


def run(*args, cwd=None):
    return subprocess.run([MAKE_SHARDS, *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          timeout=PROC_TIMEOUT_S)


def make_shards(*args, cwd=None):
    """Runs make-shards, which must succeed; returns its stdout."""
    result = run(*args, cwd=cwd)
    assert result.returncode == 0, result.stderr
    return result.stdout


def shard_paths(folder):
    return sorted(os.path.join(folder, name) for name in os.listdir(folder) if name.endswith(".tar"))


def base_plus_ext(path):
    """webdataset.tariterators.base_plus_ext."""
    match = re.match(r"^((?:.*/|)[^.]+)[.]([^/]*)$", path)
    return (match.group(1), match.group(2)) if match else (None, None)


def read_samples(shard):
    """The samples of a shard as webdataset groups them: [(key, {ext: bytes})]."""
    samples = []
    with tarfile.open(shard) as tar:
        for member in tar:
            assert member.isfile(), member.name
            assert (member.mode, member.uid, member.gid, member.mtime) == (0o644, 0, 0, 0), member.name
            key, ext = base_plus_ext(member.name)
            assert key is not None, member.name
            if not samples or samples[-1][0] != key:
                samples.append((key, {}))
            assert ext not in samples[-1][1], f"{member.name} repeated"
            samples[-1][1][ext] = tar.extractfile(member).read()
    return samples


def read_all(folder):
    return [sample for shard in shard_paths(folder) for sample in read_samples(shard)]


def decode(jpeg):
    image = cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_COLOR)
    assert image is not None
    return image


def file_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def test_synthetic_fills_shards_up_to_maxcount(tmp_path):
    out = make_shards("--synthetic", 25, "--maxcount", 10, "--classes", 4, "-o", tmp_path / "a" / "b" / "s-%06d.tar")
    folder = tmp_path / "a" / "b"
    shards = shard_paths(folder)
    assert [os.path.basename(s) for s in shards] == ["s-000000.tar", "s-000001.tar", "s-000002.tar"]
    assert [len(read_samples(s)) for s in shards] == [10, 10, 5]
    samples = read_all(folder)
    assert [key for key, _ in samples] == [f"synthetic/{i:08d}" for i in range(25)]
    for key, members in samples:
        assert set(members) == {"jpg", "cls"}
        assert members["jpg"][:3] == b"\xff\xd8\xff"
        assert re.fullmatch(rb"[0-9]+", members["cls"]), members["cls"]
    labels = [int(members["cls"]) for _, members in samples]
    assert set(labels) == {0, 1, 2, 3}
    # The summary: one line a shard with its real size, then the total.
    lines = out.strip().splitlines()
    assert len(lines) == 4
    for line, shard, count in zip(lines, shards, [10, 10, 5]):
        assert line == f"{shard}: {count} samples, {os.path.getsize(shard)} bytes"
    assert lines[-1].startswith("total: 25 samples, ")
    assert not [name for name in os.listdir(folder) if name.endswith(".partial")]


def test_maxsize_splits_shards(tmp_path):
    make_shards("--synthetic", 20, "--maxsize", "2e5", "--maxcount", 1000, "-o", tmp_path / "m" / "%d.tar")
    shards = shard_paths(tmp_path / "m")
    assert len(shards) > 1
    counts = [len(read_samples(s)) for s in shards]
    assert sum(counts) == 20
    for shard, count in zip(shards, counts):
        assert count == 1 or os.path.getsize(shard) <= 200000
    # Each shard but the last was closed only because the next sample did not fit.
    samples = read_all(tmp_path / "m")
    first = 0
    for shard, count in zip(shards[:-1], counts[:-1]):
        next_jpg = len(samples[first + count][1]["jpg"])
        assert os.path.getsize(shard) + next_jpg + 2048 > 200000  # + headers and padding
        first += count


def test_sample_larger_than_maxsize_goes_alone(tmp_path):
    out = make_shards("--synthetic", 3, "--maxsize", 1000, "-o", tmp_path / "%d.tar")
    shards = shard_paths(tmp_path)
    assert [len(read_samples(s)) for s in shards] == [1, 1, 1]
    assert out.strip().splitlines()[-1].startswith("total: 3 samples, ")


def test_output_is_deterministic(tmp_path):
    args = ["--synthetic", 12, "--maxcount", 5]
    make_shards(*args, "-o", tmp_path / "one" / "%03d.tar")
    make_shards(*args, "-o", tmp_path / "two" / "%03d.tar")
    make_shards(*args, "--seed", 1, "-o", tmp_path / "seed1" / "%03d.tar")
    one = [file_bytes(s) for s in shard_paths(tmp_path / "one")]
    assert one == [file_bytes(s) for s in shard_paths(tmp_path / "two")]
    seed1 = [file_bytes(s) for s in shard_paths(tmp_path / "seed1")]
    assert len(seed1) == len(one) and all(a != b for a, b in zip(one, seed1))


def folder_bytes(folder):
    return {name: file_bytes(os.path.join(folder, name)) for name in sorted(os.listdir(folder))}


def test_output_is_the_same_for_any_number_of_jobs(tmp_path):
    args = ["--synthetic", 70, "--maxcount", 16, "--restart-markers"]
    for jobs in (1, 3):
        make_shards(*args, "-j", jobs, "-o", tmp_path / f"syn{jobs}" / "%03d.tar")
    assert folder_bytes(tmp_path / "syn1") == folder_bytes(tmp_path / "syn3")
    pattern = f"{tmp_path}/syn1/{{000..004}}.tar"
    for jobs in (1, 4):
        make_shards("--from-shards", pattern, "--restart-markers", "--maxcount", 25, "-j", jobs,
                    "-o", tmp_path / f"re{jobs}" / "%03d.tar")
    assert folder_bytes(tmp_path / "re1") == folder_bytes(tmp_path / "re4")
    assert len(folder_bytes(tmp_path / "re1")) == 3


def test_a_failure_midway_leaves_what_one_job_would(tmp_path):
    rng = np.random.default_rng(2)
    lines = []
    for i in range(60):
        path = tmp_path / f"img{i:02d}.jpg"
        if i != 41:  # listed, never written
            ok, jpeg = cv2.imencode(".jpg", rng.integers(0, 255, (24, 32, 3), dtype=np.uint8))
            path.write_bytes(jpeg.tobytes())
        lines.append(f"{path} {i % 3}\n")
    (tmp_path / "list.txt").write_text("".join(lines))
    for jobs in (1, 4):
        result = run("--list", tmp_path / "list.txt", "--maxcount", 10, "-j", jobs, "-o", tmp_path / f"out{jobs}" / "%d.tar")
        assert result.returncode == 1 and "img41.jpg" in result.stderr, result.stderr
    assert folder_bytes(tmp_path / "out1") == folder_bytes(tmp_path / "out4")
    assert len(read_all(tmp_path / "out1")) >= 40


def test_jobs_must_be_positive(tmp_path):
    result = run("--synthetic", 3, "-j", 0, "-o", tmp_path / "%d.tar")
    assert result.returncode == 1 and "--jobs" in result.stderr


def test_shuffle_is_deterministic_and_keeps_every_sample(tmp_path):
    make_shards("--synthetic", 30, "--seed", 5, "-o", tmp_path / "plain" / "%d.tar")
    make_shards("--synthetic", 30, "--shuffle", "--seed", 5, "-o", tmp_path / "a" / "%d.tar")
    make_shards("--synthetic", 30, "--shuffle", "--seed", 5, "-o", tmp_path / "b" / "%d.tar")
    make_shards("--synthetic", 30, "--shuffle", "--seed", 6, "-o", tmp_path / "c" / "%d.tar")
    plain = read_all(tmp_path / "plain")
    a, b, c = (read_all(tmp_path / name) for name in "abc")
    assert a == b
    assert [k for k, _ in a] != [k for k, _ in plain]
    assert sorted(k for k, _ in c) == [k for k, _ in plain] and [k for k, _ in a] != [k for k, _ in c]
    # A synthetic sample depends on the seed and its index, not its place:
    # shuffling only reorders.
    assert sorted(a) == plain


def test_synthetic_images_are_textured_and_varied(tmp_path):
    make_shards("--synthetic", 24, "--min-side", 100, "--max-side", 300, "--classes", 3, "-o", tmp_path / "%d.tar")
    shapes = set()
    for _, members in read_all(tmp_path):
        image = decode(members["jpg"])
        height, width = image.shape[:2]
        assert 100 <= height <= 300 and 100 <= width <= 300
        shapes.add((height, width))
        assert image.std() > 20, "too flat"
        # Texture, not a gradient: neighbouring pixels differ somewhere in most rows.
        gray = cv2.cvtColor(image, cv2.COLOR_BGR2GRAY).astype(np.int16)
        assert np.mean(np.abs(np.diff(gray, axis=1)) > 2) > 0.2
        assert len(np.unique(image.reshape(-1, 3), axis=0)) > 1000
    assert len(shapes) > 12
    assert len({w / h for h, w in shapes}) > 12


def synthetic_jpegs(tmp_path, count):
    """count synthetic JPEG files, as bytes."""
    make_shards("--synthetic", count, "-o", tmp_path / "source" / "%d.tar")
    return [members["jpg"] for _, members in read_all(tmp_path / "source")]


def write(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def test_image_folder(tmp_path):
    jpegs = synthetic_jpegs(tmp_path, 6)
    root = tmp_path / "train"
    # Byte order of class names: "Mango" < "apple" < "zebra".
    write(root / "zebra" / "img.1.JPEG", jpegs[0])
    write(root / "zebra" / "b.jpg", jpegs[1])
    write(root / "apple" / "x.jpg", jpegs[2])
    png = cv2.imencode(".png", decode(jpegs[3]))[1].tobytes()
    write(root / "Mango" / "p.PNG", png)
    write(root / "Mango" / "notes.txt", b"not an image")
    write(root / "Mango" / ".hidden.jpg", jpegs[4])  # included, as torchvision's ImageFolder does
    write(root / "apple" / "a.jpeg", jpegs[5])
    make_shards(root, "-o", tmp_path / "out" / "%d.tar")
    samples = read_all(tmp_path / "out")
    got = [(key, sorted(members), int(members["cls"])) for key, members in samples]
    assert got == [
        ("Mango/_hidden", ["cls", "jpg"], 0),
        ("Mango/p", ["cls", "png"], 0),
        ("apple/a", ["cls", "jpg"], 1),
        ("apple/x", ["cls", "jpg"], 1),
        ("zebra/b", ["cls", "jpg"], 2),
        ("zebra/img_1", ["cls", "jpg"], 2),
    ]
    images = {key: members.get("jpg", members.get("png")) for key, members in samples}
    assert images == {"Mango/_hidden": jpegs[4], "Mango/p": png, "apple/a": jpegs[5], "apple/x": jpegs[2], "zebra/b": jpegs[1],
                      "zebra/img_1": jpegs[0]}
    # The class names beside the shards, label i naming class i.
    assert json.loads((tmp_path / "out" / "classes.json").read_text()) == ["Mango", "apple", "zebra"]


def test_image_folder_labels_are_torchvisions(tmp_path):
    """Nested folders, a symlinked folder, hidden files and folders, upper-case
    extensions and non-image files: the same classes and labels as
    torchvision.datasets.ImageFolder."""
    datasets = pytest.importorskip("torchvision.datasets")
    jpegs = synthetic_jpegs(tmp_path, 5)
    root = tmp_path / "tree"
    write(root / "b" / "deep" / "er" / "x.JPG", jpegs[0])
    write(root / "b" / ".h.jpeg", jpegs[1])
    write(root / ".hidden" / "y.jpg", jpegs[2])
    write(root / "a" / "z.jpg", jpegs[3])
    write(root / "a" / "readme.md", b"not an image")
    write(tmp_path / "elsewhere" / "w.jpg", jpegs[4])
    os.symlink(tmp_path / "elsewhere", root / "a" / "linked")
    make_shards(root, "-o", tmp_path / "out" / "%d.tar")
    ours = {key: int(members["cls"]) for key, members in read_all(tmp_path / "out")}
    reference = datasets.ImageFolder(str(root))
    theirs = {}
    for path, label in reference.samples:
        relative = os.path.relpath(path, root)
        stem, _ = os.path.splitext(relative)
        folder, name = os.path.split(stem)
        theirs[os.path.join(folder, name.replace(".", "_"))] = label
    assert ours == theirs
    assert json.loads((tmp_path / "out" / "classes.json").read_text()) == reference.classes


def restart_interval(jpeg):
    """The JPEG's DRI value (MCUs between restart markers), 0 without one."""
    i = 2
    while i + 4 <= len(jpeg) and jpeg[i] == 0xFF:
        marker, length = jpeg[i + 1], int.from_bytes(jpeg[i + 2:i + 4], "big")
        if marker == 0xDD:
            return int.from_bytes(jpeg[i + 4:i + 6], "big")
        if marker == 0xDA:
            return 0
        i += 2 + length
    return 0


def huffman_tables(jpeg):
    """The bodies of the JPEG's DHT segments before its first scan, in order."""
    tables, i = [], 2
    while i + 4 <= len(jpeg) and jpeg[i] == 0xFF and jpeg[i + 1] != 0xDA:
        length = int.from_bytes(jpeg[i + 2:i + 4], "big")
        if jpeg[i + 1] == 0xC4:
            tables.append(jpeg[i + 4:i + 2 + length])
        i += 2 + length
    return tables


def test_restart_markers_rewrite_jpegs_losslessly(tmp_path):
    jpegs = synthetic_jpegs(tmp_path, 4)
    root = tmp_path / "train"
    for i, jpeg in enumerate(jpegs):
        write(root / "c" / f"{i}.jpg", jpeg)
    # A progressive JPEG comes out sequential, with the same pixels.
    progressive = cv2.imencode(".jpg", decode(jpegs[0]), [cv2.IMWRITE_JPEG_PROGRESSIVE, 1])[1].tobytes()
    write(root / "c" / "p.jpg", progressive)
    png = cv2.imencode(".png", decode(jpegs[1]))[1].tobytes()
    write(root / "c" / "q.png", png)
    write(root / "c" / "z.jpg", jpegs[2][: len(jpegs[2]) // 2])  # truncated: packed as it is
    result = run(root, "--restart-markers", "-o", tmp_path / "out" / "%d.tar")
    assert result.returncode == 0, result.stderr
    assert "c/z" in result.stderr and "packed unchanged" in result.stderr
    assert "JPEGs packed unchanged (unreadable): 1" in result.stdout
    samples = dict((key, members) for key, members in read_all(tmp_path / "out"))
    originals = {f"c/{i}": jpeg for i, jpeg in enumerate(jpegs)}
    originals["c/p"] = progressive
    for key, original in originals.items():
        rewritten = samples[key]["jpg"]
        assert rewritten != original
        assert restart_interval(rewritten) == 1, key
        assert np.array_equal(decode(rewritten), decode(original)), key
        assert len(rewritten) < 1.15 * len(original), key
    assert samples["c/q"]["png"] == png
    assert samples["c/z"]["jpg"] == jpegs[2][: len(jpegs[2]) // 2]


def test_from_shards_repacks_every_member_in_order(tmp_path):
    jpegs = synthetic_jpegs(tmp_path, 5)
    source = tmp_path / "in"
    source.mkdir()
    samples = [(f"a/s{i}", {"jpg": jpegs[i], "cls": str(i).encode(), "json": b'{"i": %d}' % i}) for i in range(5)]
    for n, part in enumerate((samples[:3], samples[3:])):
        with tarfile.open(source / f"in-{n}.tar", "w", format=tarfile.GNU_FORMAT) as tar:
            for key, members in part:
                for ext, data in members.items():
                    info = tarfile.TarInfo(f"{key}.{ext}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
            tar.addfile(tarfile.TarInfo("a/README"), io.BytesIO(b""))  # no key: passed over, as webdataset does
    out = make_shards("--from-shards", f"{source}/in-{{0..1}}.tar", "--maxcount", "2", "-o", tmp_path / "out" / "%d.tar")
    assert "members passed over (not files, or no key): 2" in out
    assert len(shard_paths(tmp_path / "out")) == 3
    assert read_all(tmp_path / "out") == samples

    make_shards("--from-shards", f"{source}/in-{{0..1}}.tar", "--restart-markers", "-o", tmp_path / "r" / "%d.tar")
    rewritten = read_all(tmp_path / "r")
    assert [key for key, _ in rewritten] == [key for key, _ in samples]
    for (key, got), (_, want) in zip(rewritten, samples):
        assert got["cls"] == want["cls"] and got["json"] == want["json"]
        assert restart_interval(got["jpg"]) == 1, key
        assert np.array_equal(decode(got["jpg"]), decode(want["jpg"])), key


def test_from_shards_reports_a_damaged_shard_and_keeps_the_rest(tmp_path):
    make_shards("--synthetic", 6, "--maxcount", "3", "-o", tmp_path / "in" / "%d.tar")
    whole = read_all(tmp_path / "in")
    first = tmp_path / "in" / "0.tar"
    data = first.read_bytes()
    first.write_bytes(data[: len(data) // 2])
    result = run("--from-shards", f"{tmp_path}/in/{{0..1}}.tar", "-o", tmp_path / "out" / "%d.tar")
    assert result.returncode == 1
    assert "0.tar" in result.stderr and "ended early" in result.stderr
    got = read_all(tmp_path / "out")
    assert got[-3:] == whole[3:]  # the second shard whole
    assert all(sample in whole[:3] for sample in got[:-3])


def test_from_shards_refuses_shuffle(tmp_path):
    result = run("--from-shards", "x.tar", "--shuffle", "-o", tmp_path / "%d.tar")
    assert result.returncode == 2
    assert "--shuffle" in result.stderr


def test_image_folder_refuses_colliding_keys(tmp_path):
    jpegs = synthetic_jpegs(tmp_path, 2)
    write(tmp_path / "train" / "c" / "a.b.jpg", jpegs[0])
    write(tmp_path / "train" / "c" / "a_b.jpg", jpegs[1])
    result = run(tmp_path / "train", "-o", tmp_path / "out" / "%d.tar")
    assert result.returncode == 1
    assert "c/a_b" in result.stderr


def test_list_file(tmp_path):
    jpegs = synthetic_jpegs(tmp_path, 3)
    lists = tmp_path / "lists"
    write(lists / "imgs" / "one.v2.JPG", jpegs[0])
    write(lists / "imgs" / "two words.jpeg", jpegs[1])
    write(tmp_path / "elsewhere" / "three.jpg", jpegs[2])
    (lists / "train.txt").write_text(
        "# path label\n"
        "\n"
        "imgs/one.v2.JPG 3\n"
        "  imgs/two words.jpeg\t7\r\n"
        f"{tmp_path / 'elsewhere' / 'three.jpg'} 1\n")
    # Paths are relative to the list's folder, not the working directory.
    make_shards("--list", "lists/train.txt", "-o", "out/%d.tar", cwd=tmp_path)
    samples = read_all(tmp_path / "out")
    assert [(key, int(m["cls"]), m["jpg"]) for key, m in samples] == [
        ("imgs/one_v2", 3, jpegs[0]),
        ("imgs/two words", 7, jpegs[1]),
        (str(tmp_path / "elsewhere" / "three").lstrip("/"), 1, jpegs[2]),
    ]


def test_list_file_malformed_line(tmp_path):
    jpegs = synthetic_jpegs(tmp_path, 1)
    write(tmp_path / "a.jpg", jpegs[0])
    (tmp_path / "list.txt").write_text("a.jpg 0\n# fine\na.jpg cat\n")
    result = run("--list", tmp_path / "list.txt", "-o", tmp_path / "out" / "%d.tar")
    assert result.returncode == 1
    assert f"{tmp_path / 'list.txt'}:3:" in result.stderr
    assert not (tmp_path / "out").exists()


def test_unreadable_input_names_the_file(tmp_path):
    (tmp_path / "list.txt").write_text("missing.jpg 0\n")
    result = run("--list", tmp_path / "list.txt", "-o", tmp_path / "out" / "%d.tar")
    assert result.returncode == 1
    assert "missing.jpg" in result.stderr
    assert not (tmp_path / "out").exists() or not os.listdir(tmp_path / "out")


def test_empty_input_is_an_error(tmp_path):
    (tmp_path / "empty").mkdir()
    result = run(tmp_path / "empty", "-o", tmp_path / "out" / "%d.tar")
    assert result.returncode == 1 and "no samples" in result.stderr
    (tmp_path / "list.txt").write_text("# nothing\n\n")
    assert run("--list", tmp_path / "list.txt").returncode == 1


@pytest.mark.parametrize("pattern", ["shard.tar", "shard-%d-%d.tar", "shard-%s.tar", "shard-%ld.tar"])
def test_output_pattern_needs_one_integer_conversion(tmp_path, pattern):
    result = run("--synthetic", 1, "-o", tmp_path / pattern)
    assert result.returncode == 1
    assert "output pattern" in result.stderr
    assert os.listdir(tmp_path) == []


def test_usage_errors(tmp_path):
    assert run().returncode == 2
    assert run("--synthetic", 1, "--list", tmp_path / "x").returncode == 2
    assert run(tmp_path, "--quality", 50).returncode == 2
    assert run("--help").returncode == 0


def with_repeated_last_scan(jpeg, extra):
    """The JPEG with its last scan repeated `extra` times: a progressive scan bomb."""
    last_sos = jpeg.rfind(b"\xff\xda")
    eoi = len(jpeg) - 2
    return jpeg[:eoi] + jpeg[last_sos:eoi] * extra + jpeg[eoi:]


def write_shard(path, samples):
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w") as tar:
        for key, members in samples:
            for ext, data in members.items():
                info = tarfile.TarInfo(f"{key}.{ext}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))


def test_from_shards_keeps_scan_bombs_and_oversized_members_out_of_harms_way(tmp_path):
    jpegs = synthetic_jpegs(tmp_path, 3)
    progressive = cv2.imencode(".jpg", decode(jpegs[0]), [cv2.IMWRITE_JPEG_PROGRESSIVE, 1])[1].tobytes()
    bomb = with_repeated_last_scan(progressive, 150)
    assert len(bomb) < 1 << 20
    write_shard(tmp_path / "in" / "0.tar", [("a", {"jpg": bomb, "cls": b"0"}),
                                            ("b", {"jpg": jpegs[1], "cls": b"1", "big": b"x" * (2 << 20)}),
                                            ("c", {"jpg": jpegs[2], "cls": b"2"})])
    result = run("--from-shards", tmp_path / "in" / "0.tar", "--restart-markers", "--max-member-bytes", 1 << 20,
                 "-o", tmp_path / "out" / "%d.tar")
    assert result.returncode == 0, result.stderr
    # The bomb is packed as it was (servers skip it as "too many scans"), not rewritten at length.
    assert "a.jpg: packed unchanged" in result.stderr and "scans" in result.stderr
    # A sample with a member over the limit is left out whole, and named.
    assert "sample b left out" in result.stderr and "2097152 bytes" in result.stderr
    assert "samples left out (a member over --max-member-bytes): 1" in result.stdout
    got = dict(read_all(tmp_path / "out"))
    assert sorted(got) == ["a", "c"]
    assert got["a"]["jpg"] == bomb
    assert restart_interval(got["c"]["jpg"]) == 1


# --- --max-side: reduced-resolution copies -------------------------------------------

def photo_like(seed, height, width):
    """Smooth shapes, edges and mild grain: what photos look like to a resampler."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    base = 128 + 80 * np.sin(x / (width / 5.0)) * np.cos(y / (height / 4.0))
    edge = np.where(x + y > (width + height) / 2, 40.0, -40.0)
    noise = rng.normal(0, 4, (height, width))
    channels = [base + edge + noise, 255 - base + noise, base / 2 + 60 - edge / 2 + noise]
    return np.clip(np.stack(channels, -1), 0, 255).astype(np.uint8)


def encode(image, ext=".jpg", quality=95):
    ok, data = cv2.imencode(ext, image, [cv2.IMWRITE_JPEG_QUALITY, quality] if ext == ".jpg" else [])
    assert ok
    return data.tobytes()


def psnr(a, b):
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return 99.0 if mse == 0 else 10 * np.log10(255.0**2 / mse)


def test_max_side_reduces_large_jpegs_and_keeps_the_rest(tmp_path):
    Image = pytest.importorskip("PIL.Image")
    big, small = encode(photo_like(1, 600, 800)), encode(photo_like(2, 150, 200))
    tall, png = encode(photo_like(3, 1000, 350)), encode(photo_like(4, 700, 700), ".png")
    for name, data in (("a/big.jpg", big), ("a/small.jpg", small), ("b/tall.jpg", tall), ("b/large.png", png)):
        write(tmp_path / "in" / name, data)
    out = make_shards(tmp_path / "in", "--max-side", 320, "--quality", 92, "-o", tmp_path / "out" / "%d.tar")
    assert re.search(r"reduced 2 JPEGs: \d+ bytes in, \d+ bytes out \([\d.]+%\), [\d.]+ photos/s", out), out
    samples = {key: members for key, members in read_all(tmp_path / "out")}
    images = {key.split("/")[-1]: members.get("jpg", members.get("png")) for key, members in samples.items()}
    assert images["small"] == small  # not over the side: byte for byte
    assert images["large"] == png  # not a JPEG: as it was
    assert decode(images["big"]).shape == (240, 320, 3)
    assert decode(images["tall"]).shape == (320, 112, 3)  # 350 * 320 / 1000 = 112
    # Pillow's antialiased bicubic resize of the source, encoded again at quality 92.
    source = Image.open(io.BytesIO(big)).convert("RGB")
    reference = np.asarray(source.resize((320, 240), Image.BICUBIC))[:, :, ::-1]
    assert psnr(decode(images["big"]), reference) >= 32


def test_max_side_writes_restart_markers_directly_and_repacks_shards(tmp_path):
    write_shard(tmp_path / "in" / "0.tar", [("k0", {"jpg": encode(photo_like(5, 480, 640)), "cls": b"1"}),
                                            ("k1", {"jpg": encode(photo_like(6, 100, 120)), "cls": b"2"})])
    out = make_shards("--from-shards", tmp_path / "in" / "0.tar", "--max-side", 256, "--restart-markers",
                      "--filter", "bilinear", "-o", tmp_path / "out" / "%d.tar")
    assert "reduced 1 JPEGs" in out, out
    samples = read_all(tmp_path / "out")
    assert [key for key, _ in samples] == ["k0", "k1"]
    reduced, kept = samples[0][1]["jpg"], samples[1][1]["jpg"]
    assert decode(reduced).shape == (192, 256, 3)
    assert restart_interval(reduced) == 1 and restart_interval(kept) == 1  # one reduced, one rewritten
    assert samples[0][1]["cls"] == b"1"


def test_max_side_writes_the_standard_huffman_tables_unless_asked_to_optimize(tmp_path):
    # Servers build a JPEG's Huffman tables once while they recur: the
    # standard ones by default, tables made for each image on request.
    for i, (h, w) in enumerate(((480, 640), (600, 400), (500, 500))):
        write(tmp_path / "in" / "a" / f"{i}.jpg", encode(photo_like(20 + i, h, w)))
    tables, sizes = {}, {}
    for name, extra in (("standard", ()), ("optimized", ("--optimize-huffman",))):
        make_shards(tmp_path / "in", "--max-side", 256, "--restart-markers", *extra, "-o", tmp_path / name / "%d.tar")
        jpegs = [members["jpg"] for _, members in read_all(tmp_path / name)]
        assert len(jpegs) == 3 and all(max(decode(j).shape[:2]) == 256 for j in jpegs)
        tables[name] = [tuple(huffman_tables(j)) for j in jpegs]
        sizes[name] = sum(len(j) for j in jpegs)
    assert len(set(tables["standard"])) == 1  # one set for every image
    assert len(tables["standard"][0]) == 4  # DC and AC, luma and chroma
    assert len(set(tables["optimized"])) == 3  # a set per image
    assert not set(tables["optimized"]) & set(tables["standard"])
    assert sizes["optimized"] < sizes["standard"]
    assert run(tmp_path / "in", "--optimize-huffman", "-o", tmp_path / "o" / "%d.tar").returncode == 2
    refused = run("--synthetic", 4, "--max-side", 256, "--optimize-huffman", "-o", tmp_path / "s" / "%d.tar")
    assert refused.returncode == 2 and "--optimize-huffman applies to --max-side" in refused.stderr
    # A JPEG cut short is packed as it was, per-image tables or not.
    write(tmp_path / "cut" / "a" / "x.jpg", encode(photo_like(30, 400, 400))[:3000])
    cut = run(tmp_path / "cut", "--max-side", 100, "--optimize-huffman", "-o", tmp_path / "c" / "%d.tar")
    assert cut.returncode == 0 and "packed unchanged" in cut.stderr


def test_max_side_options_are_checked(tmp_path):
    write(tmp_path / "in" / "a" / "x.jpg", encode(photo_like(7, 64, 64)))
    assert run(tmp_path / "in", "--filter", "bicubic").returncode == 2  # without --max-side
    bad = run(tmp_path / "in", "--max-side", 100, "--filter", "lanczos", "-o", tmp_path / "o" / "%d.tar")
    assert bad.returncode == 1 and "--filter must be bicubic or bilinear" in bad.stderr
    for side in (0, -5, 100000):
        result = run(tmp_path / "in", "--max-side", side, "-o", tmp_path / "o" / "%d.tar")
        assert result.returncode == 1 and "--max-side" in result.stderr, side
    result = run(tmp_path / "in", "--max-side", 100, "--quality", 0, "-o", tmp_path / "o" / "%d.tar")
    assert result.returncode == 1 and "--quality" in result.stderr


def test_max_side_packs_an_undecodable_jpeg_unchanged(tmp_path):
    broken = encode(photo_like(8, 400, 400))[:3000]
    write(tmp_path / "in" / "a" / "x.jpg", broken)
    result = run(tmp_path / "in", "--max-side", 100, "-o", tmp_path / "out" / "%d.tar")
    assert result.returncode == 0, result.stderr
    assert "packed unchanged" in result.stderr
    assert read_all(tmp_path / "out")[0][1]["jpg"] == broken
