"""tensorcom.imaging against torchvision's transforms on PIL images: the same
pixels for the same boxes, the same geometry, errors that name the problem,
and crops that differ across DataLoader workers but repeat under a seed."""
import concurrent.futures
import io
import pickle

import numpy as np
import pytest

from pictures import psnr, textured  # tests/, on PYTHONPATH
from tensorcom import imaging

torch = pytest.importorskip("torch")
T = pytest.importorskip("torchvision.transforms")
F = pytest.importorskip("torchvision.transforms.functional")
from PIL import Image  # noqa: E402  (python3-pil comes with torchvision)

MODES = {"bilinear": T.InterpolationMode.BILINEAR, "bicubic": T.InterpolationMode.BICUBIC}


def encode(array, fmt="JPEG", **options):
    out = io.BytesIO()
    Image.fromarray(array).save(out, fmt, **options)
    return out.getvalue()


def pil(data):
    return Image.open(io.BytesIO(data)).convert("RGB")


@pytest.fixture(scope="module")
def jpeg():
    return encode(textured(1, 301, 433), quality=90)


class TestDecode:
    def test_jpeg_equals_pil(self, jpeg):
        out = imaging.decode(jpeg)
        assert out.dtype == np.uint8 and out.shape == (301, 433, 3)
        assert np.array_equal(out, np.asarray(pil(jpeg)))

    @pytest.mark.parametrize("mode", ["RGB", "RGBA", "L"])
    @pytest.mark.parametrize("fmt", ["PNG", "BMP", "WEBP"])
    def test_other_formats_equal_pil(self, fmt, mode):
        array = textured(2, 37, 53)
        image = Image.fromarray(array).convert(mode)
        if fmt == "BMP" and mode == "RGBA":
            pytest.skip("PIL writes no RGBA BMP that OpenCV reads alike")
        out = io.BytesIO()
        image.save(out, fmt, **({"lossless": True} if fmt == "WEBP" else {}))
        data = out.getvalue()
        decoded = imaging.decode(data)
        assert decoded.shape == (37, 53, 3)
        assert np.array_equal(decoded, np.asarray(pil(data)))

    def test_progressive_and_greyscale_jpegs(self):
        array = textured(3, 120, 90)
        for data in (encode(array, progressive=True), encode(array[:, :, 0], quality=80)):
            assert np.array_equal(imaging.decode(data), np.asarray(pil(data)))

    def test_header_peeks(self, jpeg):
        assert imaging.image_size(jpeg) == (433, 301)
        assert imaging.image_format(jpeg) == "jpeg"
        assert imaging.image_format(encode(textured(4, 8, 8), "PNG")) == "png"
        assert imaging.image_format(b"GIF89a....") == "unknown"

    def test_buffers_of_every_kind(self, jpeg):
        want = imaging.decode(jpeg)
        for data in (bytearray(jpeg), memoryview(jpeg), np.frombuffer(jpeg, dtype=np.uint8)):
            assert np.array_equal(imaging.decode(data), want)


class TestPixels:
    @pytest.mark.parametrize("interpolation", ["bilinear", "bicubic"])
    @pytest.mark.parametrize("shape", [(301, 433), (433, 301), (256, 256), (97, 500)])
    def test_resize_center_crop(self, shape, interpolation):
        data = encode(textured(5, *shape), quality=92)
        ours = imaging.Compose([imaging.Resize(256, interpolation=interpolation), imaging.CenterCrop(224)])(data)
        theirs = T.Compose([T.Resize(256, interpolation=MODES[interpolation]), T.CenterCrop(224)])(pil(data))
        assert ours.shape == (224, 224, 3)
        assert np.array_equal(ours, np.asarray(theirs))

    def test_resize_alone_and_exact_sizes(self, jpeg):
        for size, max_size in ((200, None), ((150, 220), None), (100, 120)):
            ours = imaging.Resize(size, max_size=max_size)(jpeg)
            theirs = np.asarray(T.Resize(size, max_size=max_size)(pil(jpeg)))
            assert ours.shape == theirs.shape
            if min(ours.shape[:2]) * 2 >= 301:
                assert np.array_equal(ours, theirs)
            else:  # shrunk 3x: the DCT-scaled decode first (see below), as the servers' fidelity bound
                assert psnr(ours, theirs) >= 30

    def test_center_crop_larger_than_the_image_pads_as_torchvision(self, jpeg):
        ours = imaging.Compose([imaging.Resize(200), imaging.CenterCrop((220, 320))])(jpeg)
        theirs = T.Compose([T.Resize(200), T.CenterCrop((220, 320))])(pil(jpeg))
        assert np.array_equal(ours, np.asarray(theirs))

    @pytest.mark.parametrize("interpolation", ["bilinear", "bicubic"])
    def test_the_box_get_params_gives(self, jpeg, interpolation):
        t = imaging.RandomResizedCrop((224, 192), interpolation=interpolation)
        gen = imaging.Generator(11)
        for _ in range(20):
            top, left, height, width = t.get_params(jpeg, t.scale, t.ratio, generator=gen)
            ours = t.crop(jpeg, top, left, height, width)
            theirs = F.resized_crop(pil(jpeg), top, left, height, width, [224, 192], MODES[interpolation])
            assert ours.shape == (224, 192, 3)
            assert np.array_equal(ours, np.asarray(theirs)), (top, left, height, width)

    def test_large_images_stay_within_the_servers_fidelity_bound(self):
        # Shrinking 2x or more takes the DCT-scaled decode first: close to
        # Pillow's filter (on photos far closer than on this texture), not
        # always bit-exact.
        data = encode(textured(6, 1200, 1600), quality=90)
        t = imaging.RandomResizedCrop(224, scale=(0.5, 1.0))
        gen = imaging.Generator(3)
        for _ in range(5):
            top, left, height, width = t.get_params(data, t.scale, t.ratio, generator=gen)
            ours = t.crop(data, top, left, height, width)
            theirs = F.resized_crop(pil(data), top, left, height, width, [224, 224])
            assert psnr(ours, theirs) >= 30

    def test_flip_mirrors_the_crop(self, jpeg):
        t = imaging.RandomResizedCrop(64)
        plain = t.crop(jpeg, 10, 20, 150, 200)
        assert np.array_equal(t.crop(jpeg, 10, 20, 150, 200, flip=True), plain[:, ::-1])
        always = imaging.RandomHorizontalFlip(p=1.0)
        assert np.array_equal(always(plain), plain[:, ::-1])
        assert np.array_equal(imaging.RandomHorizontalFlip(p=0.0)(plain), plain)
        tensor = torch.from_numpy(plain).permute(2, 0, 1)
        assert torch.equal(always(tensor), tensor.flip(-1))

    def test_fused_compose_draws_what_get_params_draws(self, jpeg):
        crop = imaging.RandomResizedCrop(96, generator=imaging.Generator(5))
        fused = imaging.Compose([crop, imaging.RandomHorizontalFlip(p=0.0)])
        explicit = imaging.RandomResizedCrop(96)
        params = imaging.Generator(5)
        for _ in range(5):
            top, left, height, width = explicit.get_params(jpeg, explicit.scale, explicit.ratio, generator=params)
            assert np.array_equal(fused(jpeg), explicit.crop(jpeg, top, left, height, width))

    def test_to_tensor_layout(self, jpeg):
        out = imaging.Compose([imaging.RandomResizedCrop(32), imaging.PILToTensor()])(jpeg)
        assert out.dtype == torch.uint8 and tuple(out.shape) == (3, 32, 32)


class TestRandomness:
    def test_a_seed_repeats_and_another_differs(self, jpeg):
        def crops(seed):
            t = imaging.Compose([imaging.RandomResizedCrop(48, generator=imaging.Generator(seed)),
                                 imaging.RandomHorizontalFlip()])
            return [t(jpeg) for _ in range(6)]
        a, b, c = crops(1), crops(1), crops(2)
        assert all(np.array_equal(x, y) for x, y in zip(a, b))
        assert not all(np.array_equal(x, y) for x, y in zip(a, c))

    def test_area_and_ratio_follow_torchvision(self):
        gen = imaging.Generator(7)
        image = np.zeros((375, 500, 3), np.uint8)
        boxes = [imaging.RandomResizedCrop.get_params(image, (0.08, 1.0), (3 / 4, 4 / 3), generator=gen)
                 for _ in range(2000)]
        areas = np.array([h * w / (375 * 500) for _, _, h, w in boxes])
        ratios = np.log([w / h for _, _, h, w in boxes])
        # torchvision draws the area uniformly and the log-ratio uniformly;
        # crops that do not fit are redrawn, which thins the large areas.
        assert 0.3 < areas.mean() < 0.55
        assert abs(ratios.mean()) < 0.03
        assert all(0 <= top and 0 <= left and top + h <= 375 and left + w <= 500 for top, left, h, w in boxes)

    def test_dataloader_workers_draw_different_crops(self, jpeg):
        class Same(torch.utils.data.Dataset):
            def __len__(self):
                return 8

            def __getitem__(self, i):
                return transform(jpeg)

        transform = imaging.Compose([imaging.RandomResizedCrop(24), imaging.PILToTensor()])

        def run():
            torch.manual_seed(123)
            loader = torch.utils.data.DataLoader(Same(), batch_size=4, num_workers=2)
            return torch.cat(list(loader))

        first, second = run(), run()
        assert torch.equal(first, second)  # torch.manual_seed makes the run repeatable
        assert not torch.equal(first[0], first[4])  # worker 0's first image, worker 1's first image


class TestTorchSeeds:
    def test_torch_manual_seed_restarts_the_default_stream(self, jpeg):
        t = imaging.RandomResizedCrop(40)
        torch.manual_seed(5)
        first = [t(jpeg) for _ in range(3)]
        torch.manual_seed(5)
        again = [t(jpeg) for _ in range(3)]
        assert all(np.array_equal(a, b) for a, b in zip(first, again))

    def test_a_seeded_transform_differs_between_epochs_of_fresh_workers(self, jpeg):
        class Same(torch.utils.data.Dataset):
            def __len__(self):
                return 4

            def __getitem__(self, i):
                return transform(jpeg)

        transform = imaging.Compose([imaging.RandomResizedCrop(24, generator=imaging.Generator(9)),
                                     imaging.PILToTensor()])
        torch.manual_seed(1)
        loader = torch.utils.data.DataLoader(Same(), batch_size=4, num_workers=1)
        epoch1, epoch2 = torch.cat(list(loader)), torch.cat(list(loader))
        assert not torch.equal(epoch1, epoch2)
        torch.manual_seed(1)
        assert torch.equal(torch.cat(list(loader)), epoch1)


class EncodedImage(torch.utils.data.Dataset):
    """One encoded image, transformed anew for each index: at module level,
    so that spawned DataLoader workers can load it."""

    def __init__(self, data, transform, length):
        self.data, self.transform, self.length = data, transform, length

    def __len__(self):
        return self.length

    def __getitem__(self, i):
        return self.transform(self.data)


def pickled(transform):
    return pickle.loads(pickle.dumps(transform))


class TestPickling:
    # DataLoader workers started by spawn or forkserver (Python 3.14's
    # default on Linux) receive the dataset, transforms and all, pickled.
    @pytest.mark.parametrize("make", [
        lambda: imaging.RandomResizedCrop(40, generator=imaging.Generator(3)),
        lambda: imaging.Compose([imaging.RandomResizedCrop((40, 56), scale=(0.3, 1), interpolation="bicubic",
                                                           generator=imaging.Generator(3)),
                                 imaging.RandomHorizontalFlip(), imaging.PILToTensor()]),
        lambda: imaging.Compose([imaging.Resize(64), imaging.CenterCrop(48)]),
        lambda: imaging.Compose([imaging.Resize((70, 50)), imaging.CenterCrop(80)]),  # pads
        lambda: imaging.Resize(50, max_size=60),
        lambda: imaging.CenterCrop(30),
        lambda: imaging.RandomHorizontalFlip(generator=imaging.Generator(4)),
    ])
    def test_a_loaded_transform_gives_the_originals_pixels(self, jpeg, make):
        ours, theirs = make(), make()
        loaded = pickled(theirs)
        assert repr(loaded) == repr(ours)
        for _ in range(4):
            a, b = ours(jpeg), loaded(jpeg)
            assert type(a) is type(b) and np.array_equal(np.asarray(a), np.asarray(b))

    def test_a_copy_goes_on_where_the_stream_was(self, jpeg):
        t = imaging.Compose([imaging.RandomResizedCrop(32, generator=imaging.Generator(8)),
                             imaging.RandomHorizontalFlip()])
        t(jpeg)
        copy = pickled(t)
        assert all(np.array_equal(t(jpeg), copy(jpeg)) for _ in range(3))

    def test_the_default_generator_stays_the_default(self, jpeg):
        t = pickled(imaging.RandomResizedCrop(40))
        assert t.generator is imaging.RandomResizedCrop(40).generator
        torch.manual_seed(5)
        first = t(jpeg)
        torch.manual_seed(5)
        assert np.array_equal(imaging.RandomResizedCrop(40)(jpeg), first)

    def test_spawned_workers(self, jpeg):
        train = imaging.Compose([imaging.RandomResizedCrop(24), imaging.RandomHorizontalFlip(), imaging.PILToTensor()])
        val = imaging.Compose([imaging.Resize(40), imaging.CenterCrop(32), imaging.PILToTensor()])

        def run(transform):
            torch.manual_seed(123)
            loader = torch.utils.data.DataLoader(EncodedImage(jpeg, transform, 8), batch_size=4, num_workers=2,
                                                 multiprocessing_context="spawn")
            return torch.cat(list(loader))

        crops = run(train)
        assert crops.shape == (8, 3, 24, 24)
        assert not torch.equal(crops[0], crops[4])  # each worker its own stream
        assert torch.equal(run(train), crops)  # and a seeded run repeats
        assert all(torch.equal(image, val(jpeg)) for image in run(val))


def test_torchvision_transforms_are_taken_over(jpeg):
    theirs = T.Compose([T.Resize(256), T.CenterCrop(224), T.PILToTensor()])
    ours = imaging.from_torchvision(theirs)
    assert isinstance(ours.transforms[0], imaging.Resize) and isinstance(ours.transforms[2], imaging.PILToTensor)
    assert torch.equal(ours(jpeg), theirs(pil(jpeg)))
    mixed = imaging.Compose([T.RandomResizedCrop(64, scale=(0.5, 1.0)), T.RandomHorizontalFlip(), T.PILToTensor(),
                             T.ConvertImageDtype(torch.float)])
    assert isinstance(mixed.transforms[0], imaging.RandomResizedCrop)
    assert mixed.transforms[0].scale == (0.5, 1.0)
    out = mixed(jpeg)  # ConvertImageDtype, not one of these, runs as it is
    assert out.dtype == torch.float32 and tuple(out.shape) == (3, 64, 64)


class TestErrors:
    def test_problems_are_named(self, jpeg):
        t = imaging.RandomResizedCrop(32)
        cases = {
            b"": "empty",
            b"not an image at all": "undecodable",
            jpeg[: len(jpeg) // 2]: "truncated",
        }
        for data, problem in cases.items():
            with pytest.raises(imaging.ImageError) as info:
                t(data)
            assert info.value.problem == problem, data[:20]

    def test_too_many_pixels_refused_before_decoding(self):
        png = bytearray(encode(textured(8, 4, 4), "PNG"))
        png[16:24] = (100000).to_bytes(4, "big") * 2  # IHDR claims 100000 x 100000
        with pytest.raises(imaging.ImageError) as info:
            imaging.decode(bytes(png))
        assert info.value.problem == "too many pixels"

    def test_the_problem_survives_a_pickle_and_a_worker(self):
        """A DataLoader worker's exception reaches the main process as its
        type and message alone (torch re-raises type(message)); pickling
        keeps only the message too: problem is read back from it."""
        with pytest.raises(imaging.ImageError) as info:
            imaging.decode(b"not an image at all")
        assert pickle.loads(pickle.dumps(info.value)).problem == "undecodable"
        reraised = imaging.ImageError("Caught ImageError in DataLoader worker process 0.\nOriginal Traceback (most "
                                      "recent call last):\n  ...\ntensorcom.ImageError: truncated: premature end\n")
        assert reraised.problem == "truncated"
        assert imaging.ImageError("something else").problem is None
        torch = pytest.importorskip("torch")

        class Bad(torch.utils.data.Dataset):
            def __len__(self):
                return 2

            def __getitem__(self, i):
                return imaging.decode(b"not an image at all")

        loader = torch.utils.data.DataLoader(Bad(), batch_size=1, num_workers=1)
        with pytest.raises(imaging.ImageError) as info:
            next(iter(loader))
        assert info.value.problem == "undecodable"

    def test_arguments(self, jpeg):
        with pytest.raises(TypeError, match="encoded image bytes"):
            imaging.RandomResizedCrop(32)(np.zeros((10, 10, 3), np.uint8))
        with pytest.raises(TypeError, match="PIL image"):
            imaging.Resize(32)(pil(jpeg))
        with pytest.raises(ValueError):
            imaging.RandomResizedCrop(0)
        with pytest.raises(ValueError):
            imaging.RandomResizedCrop(32, scale=(0.5, 0.1))
        with pytest.raises(ValueError):
            imaging.RandomHorizontalFlip(p=2)
        with pytest.raises(ValueError, match="interpolation"):
            imaging.Resize(32, interpolation="lanczos")
        with pytest.raises(imaging.ArgumentError, match="not inside"):
            imaging.RandomResizedCrop(32).crop(jpeg, 0, 0, 1000, 1000)


def test_threads_share_one_transform(jpeg):
    t = imaging.RandomResizedCrop(64)
    boxes = [(i, 2 * i, 100 + i, 120 + i) for i in range(24)]
    want = [t.crop(jpeg, *box) for box in boxes]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda box: t.crop(jpeg, *box), boxes))
    assert all(np.array_equal(a, b) for a, b in zip(want, got))


def test_outputs_reuse_the_memory_of_freed_ones(jpeg):
    # A DataLoader worker holds a batch of outputs, then frees them all: the
    # next batch's outputs take their blocks instead of fresh pages.
    from tensorcom import _tensorcom

    t = imaging.RandomResizedCrop(64)
    outputs = [t(jpeg) for _ in range(10)]
    held = _tensorcom.pooled_idle_bytes()  # earlier tests' blocks, less those taken
    assert all(o.flags.writeable and o.flags.c_contiguous and o.strides == (192, 3, 1) for o in outputs)
    addresses = {o.ctypes.data for o in outputs}
    want = [o.copy() for o in outputs]
    del outputs
    assert _tensorcom.pooled_idle_bytes() == held + 10 * 64 * 64 * 3
    again = [t(jpeg) for _ in range(10)]
    assert {o.ctypes.data for o in again} == addresses
    assert _tensorcom.pooled_idle_bytes() == held
    again[0][:] = 7  # one output's memory is its own
    assert all(not np.array_equal(o, again[0]) for o in again[1:])
    assert all(w.shape == (64, 64, 3) and not (w == 7).all() for w in want)


def test_idle_outputs_are_bounded():
    # 1,000 outputs of 150 KB freed at once: the pool keeps at most 128 MiB.
    from tensorcom import _tensorcom

    big = encode(textured(3, 240, 240), quality=80)
    t = imaging.Resize(224)
    outputs = [t(big) for _ in range(1000)]
    del outputs
    assert 100 << 20 <= _tensorcom.pooled_idle_bytes() <= 128 << 20
    odd = imaging.Resize(100)(big)  # a block of another size still comes and goes
    assert odd.shape == (100, 100, 3)
    del odd
    assert _tensorcom.pooled_idle_bytes() <= 128 << 20
