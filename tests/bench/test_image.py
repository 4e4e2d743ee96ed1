"""`bnnkit bench image --quick` runs every method end to end and writes its files."""

import json
from pathlib import Path

import pytest
import torch

from bnnkit.bench.image import METHODS, run_image
from bnnkit.core.errors import BnnkitError
from bnnkit.nets import resnet18

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"


# covered fast by test_a_stopped_image_run_keeps_finished_methods_and_resume_runs_the_rest (the
# whole pipeline and its files, mcdropout and bbb); the other methods' image glue runs only here
@pytest.mark.slow
@pytest.mark.skipif(not (DATA / "mnist").exists(), reason="needs ../shared/data/mnist")
def test_image_quick_all_methods(tmp_path):
    state = torch.get_rng_state()
    report = run_image(
        "mnist", METHODS, out=tmp_path, root=str(DATA), quick=True, progress=False, log=lambda s: None
    )
    assert torch.equal(torch.get_rng_state(), state)  # the caller's global RNG is left alone
    assert [r["method"] for r in report["rows"]] == list(METHODS)
    for r in report["rows"]:  # quick mode checks the pipeline, not the accuracy
        assert 0.0 <= r["test_error_pct"] <= 100.0 and 0.0 <= r["ood_auroc"] <= 1.0 and r["nll"] > 0
    assert report["sizes"] == {"train": 600, "test": 300, "ood": 200}
    rows = {r["method"]: r for r in report["rows"]}  # sghmc's default recipe is scale-adapted SGHMC
    assert rows["sghmc"]["nll"] == rows["asghmc"]["nll"] and rows["sghmc"]["nll"] != rows["sgld"]["nll"]
    assert json.loads((tmp_path / "image.json").read_text())["command"] == report["command"]
    assert (tmp_path / "reliability.png").stat().st_size > 10_000 and (tmp_path / "image.md").exists()


def test_image_bad_input(tmp_path):
    with pytest.raises(BnnkitError, match="unknown method"):
        run_image("mnist", ("sgd",), out=tmp_path)
    with pytest.raises(BnnkitError, match="unknown method 'hmc'"):  # no NUTS for the CNN
        run_image("mnist", ("hmc",), out=tmp_path)
    with pytest.raises(BnnkitError, match="dataset"):
        run_image("cifar", ("bbb",), out=tmp_path)
    with pytest.raises(BnnkitError, match="model must be one of cnn, resnet18"):
        run_image("mnist", ("bbb",), out=tmp_path, model="vgg")
    with pytest.raises(BnnkitError, match="width= scales ResNet-18"):
        run_image("mnist", ("bbb",), out=tmp_path, width=8)
    with pytest.raises(BnnkitError, match="torch device such as 'cpu' or 'cuda', got 'gpu0'"):
        run_image("mnist", ("bbb",), out=tmp_path, device="gpu0")
    if not torch.cuda.is_available():
        with pytest.raises(BnnkitError, match="sees no CUDA device"):
            run_image("mnist", ("bbb",), out=tmp_path, device="cuda")


def test_resnet18_layout():
    # torchvision's ResNet-18 with 10 classes has 11,181,642 parameters; ours swaps its 7x7x3 stem
    # (9408 weights) for a 3x3x1 one (576) and BatchNorm for GroupNorm (same affine parameters)
    net = resnet18(10, in_channels=1)
    assert sum(p.numel() for p in net.parameters()) == 11_181_642 - 9408 + 576
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in net.modules())
    small = resnet18(10, width=4, dropout=0.2)
    x = torch.randn(3, 1, 28, 28)
    assert small(x).shape == (3, 10)
    assert isinstance(small[-2], torch.nn.Dropout)
    # GroupNorm: an example's output does not depend on the rest of the batch
    small.eval()
    torch.testing.assert_close(small(x)[:1], small(x[:1]))


# covered fast by test_resnet18_layout (the network) and tests/data/test_loaders.py::test_fashion_mnist
# (the data); the end-to-end ResNet-18 and fmnist-partial runs are only here
@pytest.mark.slow
@pytest.mark.skipif(not (DATA / "fashion-mnist").exists(), reason="needs ../shared/data")
def test_image_quick_resnet18_and_fmnist_partial(tmp_path):
    report = run_image(
        "fmnist-partial",
        ("mcdropout",),
        out=tmp_path / "f",
        root=str(DATA),
        quick=True,
        progress=False,
        log=lambda s: None,
    )
    assert report["ood"] == "mnist" and report["sizes"] == {"train": 600, "test": 300, "ood": 200}
    assert "--dataset fmnist-partial" in report["command"]
    with pytest.raises(BnnkitError, match="fmnist-partial trains on"):  # no FMNIST training images offline
        run_image("fmnist", ("bbb",), out=tmp_path / "g", root=str(DATA), quick=True)
    report = run_image(
        "mnist",
        ("sgld", "mcdropout"),
        out=tmp_path / "r",
        root=str(DATA),
        quick=True,
        progress=False,
        log=lambda s: None,
        model="resnet18",
        width=4,
    )
    assert report["model"] == "resnet18" and "--model resnet18 --width 4" in report["command"]
    assert "ResNet-18 (GroupNorm), width 4" in (tmp_path / "r" / "image.md").read_text()
    for r in report["rows"]:
        assert 0.0 <= r["ood_auroc"] <= 1.0 and r["nll"] > 0


@pytest.mark.slow  # over 8 s: the default run stays under 3 min
@pytest.mark.skipif(not (DATA / "mnist").exists(), reason="needs ../shared/data/mnist")
def test_a_stopped_image_run_keeps_finished_methods_and_resume_runs_the_rest(tmp_path, monkeypatch):
    from bnnkit.bench import image

    kw = dict(out=tmp_path, root=str(DATA), quick=True, progress=False, log=lambda s: None)
    real, calls = image.method_draws, []

    def stops_on_the_second(m, *args, **kwargs):
        calls.append(m)
        if m == "bbb":
            raise KeyboardInterrupt
        return real(m, *args, **kwargs)

    monkeypatch.setattr(image, "method_draws", stops_on_the_second)
    with pytest.raises(KeyboardInterrupt):
        run_image("mnist", ("mcdropout", "bbb"), **kw)
    (first,) = [json.loads(line) for line in (tmp_path / image.ROWS_FILE).read_text().splitlines()]
    assert first["method"] == "mcdropout" and first["settings"]["quick"] is True
    calls.clear()
    monkeypatch.setattr(image, "method_draws", lambda m, *a, **k: (calls.append(m), real(m, *a, **k))[1])
    report = run_image("mnist", ("mcdropout", "bbb"), resume=True, **kw)
    assert calls == ["bbb"] and report["rows_reused"] == ["mcdropout"]
    assert report["rows"][0] == {k: first[k] for k in image.ROW_KEYS}
    assert "reused from `image_rows.jsonl`" in (tmp_path / "image.md").read_text()
    assert (tmp_path / "reliability.png").stat().st_size > 10_000
    calls.clear()
    run_image("mnist", ("mcdropout",), resume=True, seed=1, **kw)  # another seed: nothing reused
    assert calls == ["mcdropout"]


def test_fsg_prior_is_the_classification_fit_on_gp_class_rows(tmp_path):
    from bnnkit.bench import image

    g = torch.Generator().manual_seed(0)
    x, y = torch.rand(60, 1, 4, 4, generator=g), torch.arange(60) % 10
    cfg = {**image.DEFAULTS, "gp_rows": 40, "gp_class_rows": 30, "gp_steps": 5}
    assert image.DEFAULTS["step_size"]["fsgld"] == 6e-6
    gp, fitted = image.fit_gp(x, y, cfg, seed=0)
    assert fitted["fit"] == "classification" and fitted["num_points"] == 30 and "grid" not in fitted
    assert fitted["outputscale"] == pytest.approx(float(gp.kernel.outputscale))


@pytest.mark.skipif(not (DATA / "mnist").exists(), reason="needs ../shared/data/mnist")
def test_image_default_row_is_what_fit_gives(tmp_path):
    """The image bench's default row is bnnkit.fit(net, (x, y)) with the same network and seed."""
    import bnnkit
    from bnnkit.api.recipe import SamplerRecipe
    from bnnkit.bench.image import QUICK, build_net
    from bnnkit.core.random import global_rng_seeded
    from bnnkit.data.mnist import load_image_task
    from bnnkit.predict import expected_calibration_error

    report = run_image(
        "mnist", ("default",), out=tmp_path, root=str(DATA), quick=True, progress=False, log=lambda s: None
    )
    row = report["rows"][0]
    x, y, x_te, y_te, _, _ = load_image_task("mnist", str(DATA), train_rows=600, test_rows=QUICK["test_rows"])
    with global_rng_seeded(0):
        net = build_net("cnn")
    fit = bnnkit.fit(net, (x, y), seed=0, progress=False, recipe=SamplerRecipe(**QUICK["default_recipe"]))
    probs = fit.predict(x_te).probs
    assert row["test_error_pct"] == pytest.approx(100 * float((probs.argmax(-1) != y_te).double().mean()))
    assert row["ece"] == pytest.approx(expected_calibration_error(probs, y_te)[0], rel=1e-6)
    # the record carries the fit's convergence report (R-hat, ESS, MAP steps) beside the scores
    (record,) = [json.loads(line) for line in (tmp_path / "image_rows.jsonl").read_text().splitlines()]
    conv = fit.draws.config["convergence"]
    assert record["convergence"]["rhat"] == pytest.approx(conv["rhat"])
    assert record["convergence"]["map_steps"] == json.loads(json.dumps(conv["map_steps"], default=list))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_image_bench_runs_on_the_gpu(tmp_path):
    """--device cuda: data, networks, chains and scoring on the GPU; the scores are those of a fit."""
    report = run_image(
        "mnist",
        ("default", "ensemble"),
        out=tmp_path,
        root=str(DATA),
        quick=True,
        progress=False,
        log=lambda s: None,
        device="cuda",
    )
    rows = {r["method"]: r for r in report["rows"]}
    assert report["command"].endswith("--device cuda")
    # 600 images and a short run: far better than chance (90 % error), as on the CPU
    assert rows["default"]["test_error_pct"] < 40 and rows["ensemble"]["test_error_pct"] < 60
