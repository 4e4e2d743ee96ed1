"""bnnkit.fit: one call from a module and data to a posterior, in the user's units."""

import dataclasses
import math
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch

import bnnkit
from bnnkit.api import SamplerRecipe
from bnnkit.core.errors import BnnkitError
from bnnkit.diagnostics import ConvergenceWarning

# a short recipe: the same code path as the default, a fraction of its steps
SHORT = SamplerRecipe(map_max_steps=300, map_patience=3, burn_in=50, draws=20, thin=2, check_every=10)


def _data(n=80, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 2, generator=g) * 4 - 2
    y = torch.sin(x[:, 0]) + 0.5 * x[:, 1] + 0.1 * torch.randn(n, generator=g)
    return x, y


def _net(d=2, out=1, act=torch.nn.Tanh, hidden=16):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(d, hidden), act(), torch.nn.Linear(hidden, out))


def _fit(data, method="default", **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return bnnkit.fit(_net(), data, method=method, progress=False, recipe=SHORT, **kw)


@pytest.mark.slow  # over 8 s: the default run stays under 3 min
def test_predictions_and_metrics_are_in_the_targets_units():
    x, y = _data()
    a = _fit((x, y))
    b = _fit((x, 100 * y + 7))  # the same problem in other units: standardised inside, so the same fit
    pa, pb = a.predict(x), b.predict(x)
    torch.testing.assert_close(pb.mean, 100 * pa.mean + 7, rtol=1e-4, atol=1e-3)
    torch.testing.assert_close(pb.stddev, 100 * pa.stddev, rtol=1e-4, atol=1e-4)
    lo, hi = pb.interval(0.9)
    torch.testing.assert_close(
        hi - lo, 100 * (pa.interval(0.9)[1] - pa.interval(0.9)[0]), rtol=1e-4, atol=1e-3
    )
    # NLL in the targets' units: a density over y = 100 y' + 7 is 1/100 of the density over y'
    ma, mb = a.evaluate(x, y), b.evaluate(x, 100 * y + 7)
    assert mb["nll"] == pytest.approx(ma["nll"] + np.log(100), abs=1e-3)
    assert mb["rmse"] == pytest.approx(100 * ma["rmse"], rel=1e-4)
    assert 0.0 <= ma["coverage_95"] <= 1.0
    # a decent fit of a smooth function, and both variance parts present
    assert ma["rmse"] < 0.5 * float(y.std())
    assert (pa.epistemic_variance > 0).all() and (pa.aleatoric_variance > 0).all()
    torch.testing.assert_close(pa.variance, pa.epistemic_variance + pa.aleatoric_variance)


@pytest.mark.slow  # over 8 s: the default run stays under 3 min
def test_arrays_and_a_dataloader_give_the_tensors_fit():
    x, y = _data()
    t = _fit((x, y))
    a = _fit((x.numpy(), y.numpy()))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=32, shuffle=False)
    d = _fit(loader)
    torch.testing.assert_close(a.predict(x).mean, t.predict(x).mean)
    torch.testing.assert_close(d.predict(x).mean, t.predict(x).mean)


@pytest.mark.slow  # over 3 s: the default run stays under 3 min
def test_the_default_run_reports_its_diagnostics_and_warns_when_chains_disagree():
    x, y = _data()
    with pytest.warns(ConvergenceWarning, match="R-hat"):
        f = bnnkit.fit(_net(), (x, y), progress=False, recipe=SHORT)
    d = f.diagnostics
    assert d["chains"] == 4 and d["draws_per_chain"] >= 10
    assert d["rhat"] > 1.0 and d["ess"] > 0
    assert d["verdict"].startswith(("converged", "not converged"))
    assert "R-hat" in f.summary()
    assert len(d["rhat_trace"]["draws"]) == len(d["rhat_trace"]["rhat"]) >= 2


@pytest.mark.parametrize("method", ["default", "laplace", "mcdropout", "ensemble", "bbb"])
def test_save_then_load_predicts_identically(tmp_path, method):
    x, y = _data()
    opts = {"noise": 0.2} if method in ("laplace", "mcdropout", "ensemble", "bbb") else {}
    f = _fit((x, y), method=method, **opts)
    f.save(tmp_path / "fit.pt")
    g = bnnkit.load(tmp_path / "fit.pt", _net())
    pf, pg = f.predict(x), g.predict(x)
    assert torch.equal(pf.mean, pg.mean) and torch.equal(pf.stddev, pg.stddev)
    assert g.method == method and g.diagnostics["verdict"] == f.diagnostics["verdict"]


@pytest.mark.slow  # over 8 s: the default run stays under 3 min
@pytest.mark.parametrize("method", ["default", "laplace", "mcdropout"])
def test_a_saved_fit_predicts_identically_in_a_fresh_process(tmp_path, method):
    x, y = _data()
    f = _fit((x, y), method=method, **({} if method == "default" else {"noise": 0.2}))
    f.save(tmp_path / "fit.pt")
    torch.save(x, tmp_path / "x.pt")
    code = f"""
import torch, bnnkit
torch.manual_seed(123)  # the module's own weights are not used
net = torch.nn.Sequential(torch.nn.Linear(2, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
fit = bnnkit.load({str(tmp_path / "fit.pt")!r}, net)
torch.save(fit.predict(torch.load({str(tmp_path / "x.pt")!r})).mean, {str(tmp_path / "mean.pt")!r})
"""
    subprocess.run([sys.executable, "-c", code], check=True)
    assert torch.equal(torch.load(tmp_path / "mean.pt"), f.predict(x).mean)


@pytest.mark.parametrize(
    "other, names",
    [
        (lambda: _net(act=torch.nn.ReLU), "ReLU"),
        (lambda: _net(hidden=8), "shape"),
        (lambda: torch.nn.Sequential(torch.nn.Linear(2, 1)), "lacks"),
    ],
)
def test_a_mismatched_module_is_refused(tmp_path, other, names):
    x, y = _data()
    _fit((x, y)).save(tmp_path / "fit.pt")
    with pytest.raises(BnnkitError, match="does not match the saved fit") as err:
        bnnkit.load(tmp_path / "fit.pt", other())
    assert names in str(err.value) or "is [" in str(err.value)


def test_a_file_that_is_not_a_fit_is_refused(tmp_path):
    torch.save({"a": torch.zeros(2)}, tmp_path / "other.pt")
    with pytest.raises(BnnkitError, match="not a saved bnnkit fit"):
        bnnkit.load(tmp_path / "other.pt", _net())
    with pytest.raises(BnnkitError, match="no saved fit"):
        bnnkit.load(tmp_path / "missing.pt", _net())


@pytest.mark.slow  # over 8 s: the default run stays under 3 min
def test_classification_from_integer_labels():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(120, 2, generator=g)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0.5).long()  # 3 classes
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        f = bnnkit.fit(_net(out=3), (x, y), progress=False, recipe=SHORT)
    assert f.kind == "categorical"
    p = f.predict(x)
    torch.testing.assert_close(p.probs.sum(-1), torch.ones(120), rtol=0, atol=1e-5)
    m = f.evaluate(x, y)
    assert m["accuracy"] > 0.8 and set(m) >= {"nll", "ece", "brier", "error"}
    fig = f.plot_reliability(x, y)
    assert fig.axes and "ECE" in fig.axes[0].get_title()
    fig = f.plot_entropy(x, 5 * torch.randn(50, 2, generator=g))
    assert "AUROC" in fig.axes[0].get_title()


@pytest.mark.parametrize("method", ["ensemble", "mcdropout", "bbb", "laplace"])
def test_every_baseline_fits_a_classifier(method):
    # the ensemble used to refuse: anchoring needs a Gaussian likelihood (its members are early stopped)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(120, 2, generator=g)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0.5).long()  # 3 classes
    f = bnnkit.fit(_net(out=3), (x, y), method=method, progress=False)
    m = f.evaluate(x, y)
    assert f.kind == "categorical" and m["accuracy"] > 0.8, m


def test_a_classifier_ensemble_stops_each_member_at_its_best_held_out_score(tmp_path):
    g = torch.Generator().manual_seed(2)
    x = torch.randn(200, 2, generator=g)
    y = ((x[:, 0] + 0.8 * torch.randn(200, generator=g)) > 0).long()  # noisy: long fits overfit
    recipe = SamplerRecipe(map_max_steps_classifier=3000, map_patience=3)
    f = bnnkit.fit(_net(out=2), (x, y), method="ensemble", recipe=recipe, progress=False)
    steps = f.draws.config["map_steps"]
    assert f.draws.positions.shape[:2] == (1, 5) and len(steps) == 5
    assert all(best <= ran <= 3000 for best, ran in steps) and any(ran < 3000 for _, ran in steps)
    assert len({tuple(p.tolist()) for p in f.draws.positions[0, :, :4]}) == 5  # members differ
    f.save(tmp_path / "ens.pt")
    torch.testing.assert_close(
        bnnkit.load(tmp_path / "ens.pt", _net(out=2)).predict(x).probs, f.predict(x).probs
    )
    with pytest.raises(BnnkitError, match="members must be an integer >= 1"):
        bnnkit.fit(_net(out=2), (x, y), method="ensemble", members=0, progress=False)


def test_the_recipes_fan_in_weight_prior_reaches_the_sampler_and_survives_save(tmp_path):
    x, y = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        recipe = dataclasses.replace(SHORT, weight_prior="fan_in")
        f = bnnkit.fit(_net(), (x, y), progress=False, recipe=recipe)
    assert f.posterior.prior.scales == pytest.approx({"0.weight": 2**-0.5, "2.weight": 0.25})
    f.save(tmp_path / "fit.pt")
    g = bnnkit.load(tmp_path / "fit.pt", _net())
    assert g.posterior.prior.scales == f.posterior.prior.scales
    torch.testing.assert_close(g.predict(x).mean, f.predict(x).mean)
    with pytest.raises(BnnkitError, match="weight_prior must be"):
        SamplerRecipe(weight_prior="wide")


def test_binary_labels_with_one_output_are_bernoulli():
    x, y = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        f = bnnkit.fit(_net(), (x, (y > 0).long()), progress=False, recipe=SHORT)
    assert f.kind == "bernoulli" and f.predict(x).probs.shape == (80, 2)


@pytest.mark.slow  # over 8 s: the default run stays under 3 min
def test_plots_return_figures():
    x, y = _data()
    f = _fit((x, y))
    assert f.plot_predictive(x, y).axes[0].get_xlabel() == "observed"
    assert f.plot_rhat().axes[0].get_ylabel() == "function-space R-hat"
    x1 = x[:, :1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        g = bnnkit.fit(_net(d=1), (x1, y), progress=False, recipe=SHORT)
    assert g.plot_predictive(x1, y).axes[0].get_xlabel() == "x"


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda x, y: bnnkit.fit(_net(), (x, y), method="magic"), "unknown method 'magic'"),
        (lambda x, y: bnnkit.fit(_net(), (x, y), stepsize=1), "unknown option"),
        (lambda x, y: bnnkit.fit(_net(), (x, y[:10])), "80 input rows but 10 targets"),
        (lambda x, y: bnnkit.fit("net", (x, y)), "torch.nn.Module"),
        (lambda x, y: bnnkit.fit(_net(), x), "pair"),
        (lambda x, y: bnnkit.fit(_net(), (x, y), likelihood="poisson"), "likelihood must be"),
        (lambda x, y: bnnkit.fit(_net(), (x, y), recipe={"chains": 2}), "SamplerRecipe"),
        (lambda x, y: bnnkit.fit(_net(), (x, y), method="laplace", output="runs/x"), "fitted in memory"),
        (lambda x, y: bnnkit.fit(_net(), (x, y), method="fsgld", widen="no"), "widen must be True or False"),
    ],
)
def test_bad_calls_get_a_clear_error(call, match):
    x, y = _data()
    with pytest.raises(BnnkitError, match=match):
        call(x, y)


def test_predict_refuses_inputs_of_the_wrong_width_or_with_nan():
    x, y = _data()
    f = _fit((x, y))
    with pytest.raises(BnnkitError, match="2 features"):
        f.predict(torch.zeros(3, 5))
    bad = x[:4].clone()
    bad[2, 1] = float("nan")
    with pytest.raises(BnnkitError, match="rows \\[2\\]"):
        f.predict(bad)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("method", ["default", "fsgld"])
def test_chains_run_where_the_module_is(method):
    x, y = _data()
    net = _net().cuda()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        f = bnnkit.fit(net, (x, y), method=method, progress=False, recipe=SHORT)
    assert f.draws.positions.device.type == "cuda"
    assert f.predict(x).mean.device.type == "cuda"


@pytest.mark.slow  # over 3 s: the default run stays under 3 min
@pytest.mark.parametrize("method", ["fsgld", "fsghmc"])
def test_the_functional_prior_methods_fit_save_and_load(tmp_path, method):
    x, y = _data()
    f = _fit((x, y), method=method)
    assert f.evaluate(x, y)["rmse"] < 0.5 * float(y.std())
    assert f.diagnostics["chains"] == 4
    f.save(tmp_path / "fit.pt")
    back = bnnkit.load(tmp_path / "fit.pt", _net())
    far = torch.cat([x, x[:5] + 6.0])  # the training inputs and five rows far beyond them
    assert torch.equal(back.predict(far).mean, f.predict(far).mean)
    torch.testing.assert_close(back.predict(far).variance, f.predict(far).variance)
    # the prior's widening: the same draws, every variance larger by exactly the GP's latent one
    plain = _fit((x, y), method=method, widen=False)
    assert torch.equal(plain.draws.positions, f.draws.positions)
    v = f.posterior.predictive_widening(f.scaling.inputs(far)) * math.exp(2 * f.scaling.log_y_std)
    torch.testing.assert_close(f.predict(far).variance - plain.predict(far).variance, v.float())
    near, beyond = v[: len(x)].mean(), v[len(x) :].mean()
    assert beyond > 20 * near  # small at the data, the prior's variance far from it


@pytest.mark.slow  # over 3 s: the default run stays under 3 min
def test_a_cnn_classifier_on_images():
    g = torch.Generator().manual_seed(3)
    x = torch.rand(96, 1, 8, 8, generator=g)
    y = (x[:, 0, :4].mean((1, 2)) > x[:, 0, 4:].mean((1, 2))).long()  # top half brighter: class 1
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(256, 2)
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        f = bnnkit.fit(net, (x, y), progress=False, recipe=SHORT)
    assert f.kind == "categorical" and f.scaling.x_mean is None  # images are not standardised
    assert f.evaluate(x, y)["accuracy"] > 0.8
    with pytest.raises(BnnkitError):
        f.predict(torch.rand(3, 1, 9, 9))


def test_independent_draws_get_a_verdict_and_few_of_them_a_warning():
    x, y = _data()
    with pytest.warns(ConvergenceWarning, match="5 independent draws"):
        f = bnnkit.fit(_net(), (x, y), method="ensemble", noise=0.2, progress=False)
    assert f.diagnostics["ess"] == 5 and f.diagnostics["rhat"] is None
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)  # 100 draws: no warning
        g = bnnkit.fit(_net(), (x, y), method="bbb", noise=0.2, progress=False)
    assert g.diagnostics["verdict"].startswith("100 independent draws")
    la = _fit((x, y), method="laplace", noise=0.2)
    assert "no draws" in la.diagnostics["verdict"]


def test_a_run_streamed_to_a_folder_comes_back_the_same_when_called_again(tmp_path, capsys):
    x, y = _data()
    first = _fit((x, y), output=str(tmp_path / "run"))
    again = _fit((x, y), output=str(tmp_path / "run"))  # the same call: read back, not rerun
    assert torch.equal(first.predict(x).mean, again.predict(x).mean)
    assert "already finished" in capsys.readouterr().err
    with pytest.raises(BnnkitError, match="differ"):
        _fit((x, 2 * y + 1), output=str(tmp_path / "run"), standardize=False)  # other data: refused


def test_a_recipe_with_an_unknown_noise_rule_is_refused_before_any_work():
    with pytest.raises(BnnkitError, match="noise must be 'sampled', 'heldout', 'auto' or 'gp'"):
        SamplerRecipe(noise="fixed")
    for bad, match in (
        (dict(noise_gp_points=0), r"noise_gp_points must be a whole number >= 1, got 0"),
        (dict(noise_gp_points=None), r"noise_gp_points must be a whole number >= 1, got None"),
        (dict(noise_gp_below=0.0), r"noise_gp_below must be a positive fraction or None"),
        (dict(noise_widen="yes"), r"noise_widen must be True or False, got 'yes'"),
        (dict(drift_same_time=1), r"drift_same_time must be True or False, got 1"),
        (dict(noise_drift_above=0.0), r"noise_drift_above must be a positive multiple or None"),
        (dict(drift_step_size=-1e-3), r"drift_step_size must be a positive step per datum or None"),
    ):
        with pytest.raises(BnnkitError, match=match):
            SamplerRecipe(**bad)


def _smooth_target_fits(recipe, noise_sds):
    """For each noise sd (the first nearly noiseless, the last noisy): whether a noise rule should
    hold it, the rows and the default's fit with ``recipe`` on 200 rows of a smooth target."""
    g = torch.Generator().manual_seed(1)
    x = torch.rand(200, 2, generator=g) * 4 - 2
    smooth = torch.sin(x[:, 0]) + 0.5 * x[:, 1]
    for i, noise_sd in enumerate(noise_sds):
        y = smooth + noise_sd * torch.randn(200, generator=g)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            f = bnnkit.fit(_net(), (x, y), progress=False, recipe=recipe, seed=0)
        yield noise_sd, i == 0, x, y, f


def test_the_auto_noise_rule_holds_a_nearly_noiseless_targets_noise_and_samples_a_noisy_ones():
    import dataclasses

    auto = dataclasses.replace(SHORT, noise="auto", map_max_steps=2000, map_patience=10)
    for noise_sd, held, _x, _y, f in _smooth_target_fits(auto, (0.0, 0.5)):
        conv = f.draws.config["convergence"]
        ratio = conv["map_heldout_rmse"]  # standardised targets: the ratio to their sd
        assert (ratio < auto.noiseless_below) == held, (noise_sd, ratio)
        assert (conv["noise_held"] is not None) == held
        # a held noise leaves no noise precision among the draws' coordinates
        assert ("likelihood.log_precision" in f.posterior.view.names) != held
        if held:
            assert conv["noise_held"] == pytest.approx(ratio)
            assert f.posterior.likelihood.noise == pytest.approx(ratio)


def test_the_default_runs_a_noisy_target_exactly_as_with_its_noise_sampled():
    """Protocol 15's noise rule fits no GP where the target is not nearly noiseless: the default's
    draws there are bit for bit those of ``noise="sampled"`` (protocol 14's), which is why the
    UCI page carries protocol 14's Boston, concrete, wine, kin8nm and protein rows."""
    import dataclasses

    default = SamplerRecipe()  # protocol 15's noise rule
    assert (default.noise, default.noise_gp_below, default.noise_widen) == ("gp", 0.5, True)
    g = torch.Generator().manual_seed(3)
    x = torch.rand(120, 2, generator=g) * 4 - 2
    y = torch.sin(x[:, 0]) + 0.5 * torch.randn(120, generator=g)
    fits = []
    for recipe in (
        SHORT,
        dataclasses.replace(SHORT, noise="sampled", noise_gp_below=None, noise_widen=False),
    ):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            fits.append(bnnkit.fit(_net(), (x, y), progress=False, recipe=recipe, seed=0))
    conv = fits[0].draws.config["convergence"]
    assert conv["map_heldout_rmse"] > SHORT.noiseless_below  # not nearly noiseless
    assert conv["noise_held"] is None and "noise_gp" not in conv and "noise_fit" not in conv["seconds"]
    assert torch.equal(fits[0].draws.positions, fits[1].draws.positions)
    # the sampled noise recorded beside the MAP's error: the median of the draws' noise sd
    post, pos = fits[0].posterior, fits[0].draws.positions
    idx = post.view.offsets[post.view.names.index("likelihood.log_precision")]
    sds = sorted(float(v) for v in torch.exp(-0.5 * pos[..., idx].double()).reshape(-1))
    assert sds[0] <= conv["noise_sampled"] <= sds[-1] and conv["noise_sampled"] in sds
    assert getattr(fits[0].posterior, "predictive_widening", None) is None
    z = torch.linspace(-5, 5, 7).unsqueeze(1).repeat(1, 2)
    assert torch.equal(fits[0].predict(z).variance, fits[1].predict(z).variance)


def test_the_gp_noise_rule_holds_a_nearly_noiseless_targets_noise_at_the_gps_estimate(tmp_path):
    """noise="gp": held where the MAP phase says nearly noiseless, at a GP's noise, which recovers
    a known noise sd (0.02 on targets of sd ~0.8, in standardised units); a noisy target's noise
    stays sampled; noise_gp_below and noise_widen as documented."""
    import dataclasses

    # the rule alone (the default also asks noise_gp_below=0.5 and noise_widen=True)
    gp = dataclasses.replace(
        SHORT, noise="gp", noise_gp_below=None, noise_widen=False, map_max_steps=2000, map_patience=10
    )
    for noise_sd, held, x, y, f in _smooth_target_fits(gp, (0.02, 0.5)):
        conv = f.draws.config["convergence"]
        assert (conv["noise_held"] is not None) == held, (noise_sd, conv["map_heldout_rmse"])
        assert ("likelihood.log_precision" in f.posterior.view.names) != held
        assert ("noise_fit" in conv["seconds"]) == held
        if held:
            truth = noise_sd / float(y.std())  # the fit standardises the targets
            assert conv["noise_held"] == pytest.approx(truth, rel=0.3)
            assert conv["noise_held"] < conv["map_heldout_rmse"]  # below one network's error
            assert f.posterior.likelihood.noise == pytest.approx(conv["noise_held"])
            assert conv["noise_gp"] == conv["noise_held"] and conv["noise_sampled"] is None
            # noise_gp_below: held only where the GP's noise is below that share of the MAP's error
            ratio = conv["noise_gp"] / conv["map_heldout_rmse"]
            for below in (0.5 * ratio, 2 * ratio):
                recipe = dataclasses.replace(gp, noise_gp_below=below)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", ConvergenceWarning)
                    f2 = bnnkit.fit(_net(), (x, y), progress=False, recipe=recipe, seed=0)
                c2 = f2.draws.config["convergence"]
                assert c2["noise_gp"] == conv["noise_gp"]  # fitted either way, recorded
                assert (c2["noise_held"] is not None) == (below > ratio), below
            # noise_widen: the same draws, every predictive variance larger by the GP's latent
            # variance, small at the data and large far from it; saved and loaded with the fit
            widened = dataclasses.replace(gp, noise_widen=True)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                f3 = bnnkit.fit(_net(), (x, y), progress=False, recipe=widened, seed=0)
            assert torch.equal(f3.draws.positions, f.draws.positions)
            near, far = x[:5], torch.tensor([[30.0, 30.0]])
            v_near, v_far = (f3.predict(z).variance - f.predict(z).variance for z in (near, far))
            assert (v_near > 0).all() and float(v_far.min()) > 50 * float(v_near.max())
            f3.save(tmp_path / "w.pt")
            assert torch.allclose(
                bnnkit.load(tmp_path / "w.pt", _net()).predict(far).variance, f3.predict(far).variance
            )


def test_noise_drift_samples_again_with_the_gps_noise_held_exactly_as_holding_it_from_the_start(tmp_path):
    """noise_drift_above: where the GP's noise was not held and the draws' sampled noise is above
    that multiple of the MAP phase's error, the sampling phase runs again from the same warm
    starts and seed with the GP's noise held (and its widening): the draws are then those of the
    recipe that held the GP's noise from the start, bit for bit; below the multiple nothing changes."""
    sampled = dataclasses.replace(
        SHORT, noise_gp_below=1e-9, map_max_steps=2000, map_patience=10, drift_step_size=None
    )
    held = dataclasses.replace(sampled, noise_gp_below=None)
    fits = {}
    for name, recipe in (
        ("sampled", sampled),
        ("never", dataclasses.replace(sampled, noise_drift_above=1e9)),
        ("drift", dataclasses.replace(sampled, noise_drift_above=1e-9)),
        ("held", held),
    ):
        (_sd, nearly_noiseless, x, _y, f) = next(_smooth_target_fits(recipe, (0.02,)))
        fits[name] = f
    conv = {k: f.draws.config["convergence"] for k, f in fits.items()}
    assert conv["sampled"]["noise_held"] is None and conv["sampled"]["noise_drift"] is None
    # above every ratio: nothing changes
    assert torch.equal(fits["never"].draws.positions, fits["sampled"].draws.positions)
    assert conv["never"]["noise_drift"] is None
    # below it: sampled again with the GP's noise held, as the held recipe from the start
    drift = conv["drift"]["noise_drift"]
    assert drift["noise_sampled"] == conv["sampled"]["noise_sampled"] == conv["drift"]["noise_sampled"]
    assert drift["ratio"] == pytest.approx(
        conv["sampled"]["noise_sampled"] / conv["sampled"]["map_heldout_rmse"]
    )
    assert drift["first_run"]["draws_per_chain"] == conv["sampled"]["draws_per_chain"]
    assert conv["drift"]["noise_held"] == conv["drift"]["noise_gp"] == conv["held"]["noise_held"]
    assert "likelihood.log_precision" not in fits["drift"].posterior.view.names
    assert torch.equal(fits["drift"].draws.positions, fits["held"].draws.positions)
    z = torch.tensor([[30.0, 30.0]])  # far from the data: the GP's widening is there too
    assert torch.equal(fits["drift"].predict(z).variance, fits["held"].predict(z).variance)
    assert getattr(fits["drift"].posterior, "predictive_widening", None) is not None
    assert "were sampled again with the noise held" in fits["drift"].summary()
    # streamed to a folder: the second run in its own subfolder; called again, both are read back
    drift = dataclasses.replace(sampled, noise_drift_above=1e-9)
    for _ in range(2):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            streamed = bnnkit.fit(
                _net(), (x, _y), progress=False, recipe=drift, seed=0, output=str(tmp_path / "run")
            )
        assert torch.equal(streamed.draws.positions, fits["drift"].draws.positions)
    assert (tmp_path / "run" / "noise_held").is_dir()
    assert SamplerRecipe().noise_drift_above == 1.15  # the default since protocol 16


def test_drift_step_size_sets_the_step_of_the_second_sampling_phase_only():
    """drift_step_size: the sampling phase run again with the GP's noise held takes that step;
    its draws are those of the recipe that held the GP's noise from the start at that step, and
    its first phase (and a fit where the noise never drifted) are untouched."""
    sampled = dataclasses.replace(
        SHORT, noise_gp_below=1e-9, map_max_steps=2000, map_patience=10, drift_step_size=None
    )
    drift = dataclasses.replace(sampled, noise_drift_above=1e-9)
    fits = {}
    for name, recipe in (
        ("drift", drift),
        ("drift_step", dataclasses.replace(drift, drift_step_size=3e-4, drift_same_time=False)),
        ("held_step", dataclasses.replace(sampled, noise_gp_below=None, step_size=3e-4)),
        ("never", dataclasses.replace(sampled, noise_drift_above=1e9)),
        (
            "never_step",
            dataclasses.replace(sampled, noise_drift_above=1e9, drift_step_size=3e-4, drift_same_time=True),
        ),
    ):
        fits[name] = next(_smooth_target_fits(recipe, (0.02,)))[-1]
    conv = {k: f.draws.config["convergence"] for k, f in fits.items()}
    assert conv["drift_step"]["noise_drift"]["first_run"] == conv["drift"]["noise_drift"]["first_run"]
    assert conv["drift_step"]["step_size"] == 3e-4 and "step_size" not in conv["drift"]
    assert torch.equal(fits["drift_step"].draws.positions, fits["held_step"].draws.positions)
    assert not torch.equal(fits["drift_step"].draws.positions, fits["drift"].draws.positions)
    assert torch.equal(fits["never_step"].draws.positions, fits["never"].draws.positions)
    # drift_same_time: the second phase's burn-in and thinning grow by the steps' ratio
    k = SHORT.step_size / 3e-4
    same_time = dataclasses.replace(drift, drift_step_size=3e-4, drift_same_time=True)
    longer = dataclasses.replace(
        sampled,
        noise_gp_below=None,
        step_size=3e-4,
        burn_in=round(SHORT.burn_in * k),
        thin=round(SHORT.thin * k),
    )
    a, b = (next(_smooth_target_fits(r, (0.02,)))[-1] for r in (same_time, longer))
    assert torch.equal(a.draws.positions, b.draws.positions)
    assert (
        a.draws.config["convergence"]["noise_drift"]["first_run"] == conv["drift"]["noise_drift"]["first_run"]
    )


def test_stacked_chains_weight_the_predictive_and_survive_save_and_load(tmp_path):
    x, y = _data(n=80)
    stacked = dataclasses.replace(SHORT, chain_weights="stacked")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        f = bnnkit.fit(_net(), (x, y), progress=False, recipe=stacked, seed=0)
        equal = dataclasses.replace(SHORT, chain_weights="equal")
        plain = bnnkit.fit(_net(), (x, y), progress=False, recipe=equal, seed=0)
    report = f.draws.config["convergence"]["stacking"]
    w = torch.tensor(report["chain_weights"], dtype=torch.float64)
    assert len(w) == SHORT.chains and abs(float(w.sum()) - 1) < 1e-9
    # the same draws as the equal-weight fit, weighted chain by chain
    assert torch.equal(f.draws.positions, plain.draws.positions)
    per_chain = f.draws.weights.reshape(SHORT.chains, -1).sum(1)
    torch.testing.assert_close(per_chain, w)
    xt = torch.linspace(-2, 2, 7).reshape(-1, 1).repeat(1, 2)
    assert float(w.max() - w.min()) > 1e-3  # four modes that fit differently
    assert not torch.allclose(f.predict(xt).mean, plain.predict(xt).mean)  # the predictive reads them
    f.save(tmp_path / "f.pt")
    back = bnnkit.load(tmp_path / "f.pt", _net())
    torch.testing.assert_close(back.predict(xt).mean, f.predict(xt).mean)
    with pytest.raises(BnnkitError, match="chain_weights must be"):
        SamplerRecipe(chain_weights="best")


def test_stacking_scores_a_seeded_subset_of_many_rows(monkeypatch):
    import bnnkit.api.recipe as recipe

    monkeypatch.setattr(recipe, "STACK_ROWS", 30)  # 80 rows: the subset path, as on 2,000+ rows
    x, y = _data(n=80)
    stacked = dataclasses.replace(SHORT, chain_weights="stacked")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        a, b = (bnnkit.fit(_net(), (x, y), progress=False, recipe=stacked, seed=3) for _ in range(2))
    ra, rb = (f.draws.config["convergence"]["stacking"] for f in (a, b))
    assert ra["rows"] == 30 and ra == rb  # the same rows and weights from the same seed


def test_auto_chain_weights_stack_only_a_nearly_noiseless_target():
    g = torch.Generator().manual_seed(1)
    x = torch.rand(200, 2, generator=g) * 4 - 2
    smooth = torch.sin(x[:, 0]) + 0.5 * x[:, 1]
    auto = dataclasses.replace(SHORT, chain_weights="auto", map_max_steps=2000, map_patience=10)
    for noise_sd, stacks in ((0.0, True), (0.5, False)):
        y = smooth + noise_sd * torch.randn(200, generator=g)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            f = bnnkit.fit(_net(), (x, y), progress=False, recipe=auto, seed=0)
        assert ("stacking" in f.draws.config["convergence"]) == stacks
        assert (f.draws.log_weights is not None) == stacks


def test_the_noiseless_step_runs_only_on_a_nearly_noiseless_target():
    g = torch.Generator().manual_seed(1)
    x = torch.rand(200, 2, generator=g) * 4 - 2
    smooth = torch.sin(x[:, 0]) + 0.5 * x[:, 1]
    small = dataclasses.replace(SHORT, noiseless_step_size=3e-4, map_max_steps=2000, map_patience=10)
    for noise_sd, applies in ((0.0, True), (0.5, False)):
        y = smooth + noise_sd * torch.randn(200, generator=g)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            f = bnnkit.fit(_net(), (x, y), progress=False, recipe=small, seed=0)
            plain = bnnkit.fit(
                _net(),
                (x, y),
                progress=False,
                recipe=dataclasses.replace(small, noiseless_step_size=None),
                seed=0,
            )
        conv = f.draws.config["convergence"]
        assert (conv.get("step_size") == 3e-4) == applies
        # the same MAP phase either way; the draws differ exactly where the smaller step ran
        assert torch.equal(f.draws.positions, plain.draws.positions) != applies
    with pytest.raises(BnnkitError, match="noiseless_step_size must be a positive"):
        SamplerRecipe(noiseless_step_size=0.0)


def test_a_nearly_noiseless_target_gets_the_measured_advice_and_a_noisy_one_none(tmp_path):
    g = torch.Generator().manual_seed(1)
    x = torch.rand(200, 2, generator=g) * 4 - 2
    smooth = torch.sin(x[:, 0]) + 0.5 * x[:, 1]
    recipe = dataclasses.replace(SHORT, map_max_steps=2000, map_patience=10)
    for noise_sd, advised in ((0.0, True), (0.5, False)):
        y = smooth + noise_sd * torch.randn(200, generator=g)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            f = bnnkit.fit(_net(), (x, y), progress=False, recipe=recipe, seed=0)
        assert ("advice" in f.diagnostics) == advised
        assert ("Note: nearly noiseless target" in f.summary()) == advised
        if advised:  # the advice says what the noise rule did
            held = f.draws.config["convergence"]["noise_held"] is not None
            assert ("held at a GP's estimate" in f.diagnostics["advice"]) == held
            assert ("the noise stays sampled" in f.diagnostics["advice"]) != held
            f.save(tmp_path / "f.pt")
            assert bnnkit.load(tmp_path / "f.pt", _net()).diagnostics["advice"] == f.diagnostics["advice"]


def test_a_classifier_whose_chains_all_ran_their_budget_after_early_bests_gets_the_measured_advice():
    from bnnkit.api.recipe import capped_map_advice

    r = SamplerRecipe()
    mnist = {"map_steps": {0: [3376, 20000], 1: [5064, 20000], 2: [11816, 20000], 3: [3376, 20000]}}
    assert "ran its 20,000 steps" in capped_map_advice(r, mnist) and "3,376-11,816" in capped_map_advice(
        r, mnist
    )
    late = {"map_steps": {0: [19929, 20000], 1: [17374, 20000], 2: [16863, 20000], 3: [20000, 20000]}}
    stopped = {"map_steps": {0: [3376, 20000], 1: [5064, 20000], 2: [3376, 19740], 3: [3376, 20000]}}
    for conv in (late, stopped, None, {}):  # still improving; one chain stopped by its patience; nothing
        assert capped_map_advice(r, conv) is None
    assert capped_map_advice(SamplerRecipe(map_patience_steps_classifier=4000), mnist) is None  # already set
    # through fit: random labels, so every chain's held-out score is best at once, and a budget of
    # 3 scores that 20 scores of patience outlast
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(400, 2, generator=g), torch.randint(2, (400,), generator=g)
    net = torch.nn.Sequential(torch.nn.Linear(2, 64), torch.nn.ReLU(), torch.nn.Linear(64, 2))
    recipe = dataclasses.replace(SHORT, map_max_steps=300, map_patience=20)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        f = bnnkit.fit(net, (x, y), progress=False, recipe=recipe, seed=0)
    steps = f.draws.config["convergence"]["map_steps"].values()
    assert all(ran == 300 for _, ran in steps) and sum(best <= 150 for best, _ in steps) >= 2
    assert "Note: every chain's MAP phase ran its 300 steps" in f.summary()


def test_a_classifier_or_a_fixed_noise_is_never_held():
    from bnnkit.api.recipe import held_noise
    from bnnkit.core.posterior import Posterior
    from bnnkit.likelihoods import Bernoulli, Gaussian
    from bnnkit.priors import GaussianPrior

    y = torch.zeros(10)
    for lik, expect in ((Gaussian(0.5, learn_noise=True), 0.01), (Gaussian(0.5), None), (Bernoulli(), None)):
        post = Posterior(_net(out=1), lik, GaussianPrior(1.0), num_data=10)
        for rule in ("heldout", "auto"):
            got = held_noise(SamplerRecipe(noise=rule), post, 0.01, y + torch.arange(10.0))
            assert got == expect, (lik, rule)
        x = torch.linspace(-1, 1, 10).unsqueeze(1)
        got = held_noise(
            SamplerRecipe(noise="gp", noise_gp_below=None), post, 0.01, y + torch.arange(10.0), x=x
        )
        assert (got is None) == (expect is None), lik  # a GP's noise, floored at 0.01
        assert got is None or got >= 0.01
        assert held_noise(SamplerRecipe(noise="sampled"), post, 0.01, y + torch.arange(10.0)) is None
        if expect is not None:  # the GP rule needs the training inputs it fits
            with pytest.raises(BnnkitError, match="needs the training inputs x"):
                held_noise(SamplerRecipe(noise="gp"), post, 0.01, y + torch.arange(10.0))


def test_the_epoch_caps_shrink_the_budget_on_few_rows_and_leave_many_rows_alone():
    from bnnkit.api.recipe import map_steps_cap, sampler_schedule

    r = SamplerRecipe(map_max_epochs=300, sampler_max_epochs=300)  # 1000 burn-in + 100 x 50
    # 224 rows: the MAP fits 202 of them (7 minibatches of 32), 300 epochs = 2100 steps
    assert map_steps_cap(r, 224, 32) == 2100
    # the sampling phase's 6000 steps shrink to 300 epochs of 7 minibatches: factor 0.35
    assert sampler_schedule(r, 224, 32) == (350, 18)
    assert map_steps_cap(r, 10_000, 32) == r.map_max_steps  # the step cap binds first
    assert sampler_schedule(r, 10_000, 32) == (r.burn_in, r.thin)
    uncapped = SamplerRecipe(map_max_epochs=None, sampler_max_epochs=None)
    assert map_steps_cap(uncapped, 224, 32) == uncapped.map_max_steps
    assert sampler_schedule(uncapped, 224, 32) == (uncapped.burn_in, uncapped.thin)
    # a floor in steps: 224 rows keep 3,000 of the 6,000 steps (factor 0.5), not 2,100
    floored = SamplerRecipe(sampler_max_epochs=300, sampler_min_steps=3000)
    assert sampler_schedule(floored, 224, 32) == (500, 25)
    assert sampler_schedule(floored, 455, 32) == sampler_schedule(r, 455, 32)  # the epoch cap binds
    assert sampler_schedule(floored, 10_000, 32) == (r.burn_in, r.thin)
    with pytest.raises(BnnkitError, match="sampler_min_steps must be a whole number"):
        SamplerRecipe(sampler_min_steps=0)


def test_a_capped_recipe_runs_the_steps_it_says():
    x, y = _data(n=64)  # 2 minibatches of 32 per epoch (the sampler's); the MAP fits 58 rows
    r = SamplerRecipe(
        map_max_steps=10_000,
        map_max_epochs=20,
        map_patience=10**6,
        burn_in=100,
        draws=10,
        thin=10,
        sampler_max_epochs=50,
        check_every=10,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        f = bnnkit.fit(_net(), (x, y), progress=False, recipe=r)
    conv = f.draws.config["convergence"]
    steps = conv["map_steps"]
    assert all(run == 40 for _, run in steps.values())  # 20 epochs of 2 minibatches
    # the record says where the seconds went: both phases timed, together within the fit's time
    assert conv["seconds"]["map_phase"] > 0 and conv["seconds"]["sampling"] > 0
    # 50 epochs of 2 minibatches = 100 steps for 200 planned: factor 0.5, so 50 burn-in, thinned by 5
    assert f.draws.config["num_warmup"] == 50 and f.draws.config["thin"] == 5


def test_function_draws_average_to_the_predictive_mean_in_the_targets_units():
    x, y = _data()
    f = _fit((x, 1000.0 * y))  # targets in other units: the draws come back in them
    g = torch.Generator().manual_seed(1)
    fs = f.sample_functions(x[:5], num=4000, generator=g)
    assert fs.shape == (4000, 5, 1)
    mean, sd = fs.mean(0).squeeze(-1), fs.std(0).squeeze(-1)
    # 4000 picks with replacement from the 80 draws: the pick mean is within MC error of theirs
    assert torch.all((mean - f.predict(x[:5]).mean).abs() < 5 * sd / 4000**0.5)
    again = f.sample_functions(x[:5], num=3, generator=torch.Generator().manual_seed(1))
    assert torch.equal(again, fs[:3])  # the same generator state picks the same draws
    with pytest.raises(BnnkitError, match="positive integer"):
        f.sample_functions(x, num=0)


def test_a_laplace_fit_draws_from_its_linearised_predictive():
    x, y = _data()
    f = _fit((x, y), method="laplace")
    fs = f.sample_functions(x[:4], num=4000, generator=torch.Generator().manual_seed(0)).squeeze(-1)
    assert fs.shape == (4000, 4) and torch.isfinite(fs).all()
    pred = f.predict(x[:4])
    # the GLM predictive: mean the MAP's output, variance the epistemic part of predict's
    assert torch.all((fs.mean(0) - pred.mean).abs() < 5 * fs.std(0) / 4000**0.5)
    ratio = fs.var(0) / pred.epistemic_variance
    assert torch.all((ratio - 1).abs() < 0.15), ratio  # sd of a variance estimate at n=4000: 2.2 %


def test_the_gp_prior_kernel_is_an_option_of_the_functional_methods_only():
    x, y = _data(n=40)
    f = _fit((x, y), method="fsgld", kernel="rbf+linear")
    kernel = f.posterior.gp.kernel
    assert type(kernel).__name__ == "AdditiveKernel", kernel
    with pytest.raises(BnnkitError, match="has none"):
        bnnkit.fit(_net(), (x, y), method="ensemble", kernel="rbf")


def test_gp_points_caps_the_rows_of_the_gp_prior_fit():
    x, y = _data(n=40)
    f = _fit((x, y), method="fsgld", gp_points=25)
    assert f.posterior.gp.fitted["num_points"] == 25
    for bad in (1, 2.5, True):
        with pytest.raises(BnnkitError, match="gp_points must be an integer"):
            _fit((x, y), method="fsgld", gp_points=bad)


def test_prior_factors_set_the_vecchia_factors_a_step_uses():
    x, y = _data(n=40)
    f = _fit((x, y), method="fsgld", prior_factors=3)
    assert f.posterior.vecchia.settings.factors_per_step == 3
    assert _fit((x, y), method="fsgld").posterior.vecchia.settings.factors_per_step == 8
    with pytest.raises(BnnkitError, match="factors_per_step must be an integer"):
        _fit((x, y), method="fsgld", prior_factors=0)


def test_box_points_add_measurement_points_around_the_inputs():
    x, y = _data(n=40)
    f = _fit((x, y), method="fsghmc", box_points=20, box_margin=0.5)
    meas = f.posterior.measurement
    assert (meas.spec.num_from_data, meas.spec.num_uniform, meas.spec.margin) == (40, 20, 0.5)
    xs = f._inputs(x)  # the box: the standardised inputs' range widened by half of it on each side
    width = xs.max(0).values - xs.min(0).values
    assert torch.allclose(meas.low, xs.min(0).values - 0.5 * width)
    assert torch.isfinite(f.predict(x).mean).all()


def test_measure_at_adds_the_inputs_where_one_will_predict_to_the_measurement_points():
    x, y = _data(n=40)
    new = torch.tensor([[5.0, 5.0], [-6.0, 0.0], [5.0, 5.0]])  # in the caller's units, one repeated
    f = _fit((x, y), method="fsgld", measure_at=new)
    points = f.posterior.measurement.points
    assert points.shape[0] == 42  # the 40 training inputs and the two new rows, standardised
    torch.testing.assert_close(points[-2:], f._inputs(new[:2]))
    with pytest.raises(BnnkitError, match="measure_at must hold rows shaped as the inputs"):
        _fit((x, y), method="fsgld", measure_at=torch.zeros(3, 5))
    with pytest.raises(BnnkitError, match="no box_points"):
        _fit((x, y), method="fsgld", measure_at=new, box_points=5)
    with pytest.raises(BnnkitError, match="set the GP prior of fsgld / fsghmc"):
        _fit((x, y), method="default", measure_at=new)


def test_edge_points_join_the_measurement_points_and_bad_counts_are_refused():
    x, y = _data(n=40)
    f = _fit((x, y), method="fsgld", edge_points=15)
    spec = f.posterior.measurement.spec
    assert (spec.num_from_data, spec.num_uniform, spec.num_edge, spec.margin) == (40, 0, 15, 0.25)
    for bad in (2.5, -1, True):
        with pytest.raises(BnnkitError, match="edge_points must be an integer"):
            _fit((x, y), method="fsgld", edge_points=bad)
    with pytest.raises(BnnkitError, match="box_points must be an integer"):
        _fit((x, y), method="fsgld", box_points=2.5)


def test_a_handful_of_rows_fits_without_a_held_out_score():
    x, y = _data(n=4)  # the MAP phase's held-out tenth is no row: it runs its budget unscored
    f = _fit((x, y))
    steps = f.draws.config["convergence"]["map_steps"]
    assert all(ran == SHORT.map_max_steps for _, ran in steps.values())
    assert torch.isfinite(f.predict(x).mean).all()


def test_a_classifiers_patience_in_steps_and_thinning_apply_to_classifiers_only():
    # 400 rows, batch 32: an epoch of 360 fitted rows is 12 steps, so a score every 100 steps; a
    # patience of 150 steps is one score where the classifier's recipe sets it
    recipe = SamplerRecipe(map_max_steps=3000, map_patience=20, map_patience_steps_classifier=150, thin_classifier=1,
                           chains=2, burn_in=5, draws=8, thin=3, check_every=4)  # fmt: skip
    g = torch.Generator().manual_seed(0)
    x = torch.randn(400, 2, generator=g)
    out = {}
    for kind, y in (
        ("classifier", (x[:, 0] > 0).long()),
        ("regression", x[:, 0] + 0.1 * torch.randn(400, generator=g)),
    ):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            f = bnnkit.fit(torch.nn.Linear(2, 2 if kind == "classifier" else 1), (x, y), recipe=recipe, seed=0,
                           progress=False)  # fmt: skip
        out[kind] = (f.draws.config["thin"], list(f.draws.config["convergence"]["map_steps"].values()))
    thin, steps = out["classifier"]
    assert thin == 1 and all(ran == best + 100 for best, ran in steps)
    thin, steps = out["regression"]  # 20 scores without improvement, or the cap
    assert thin == 3 and all(ran == best + 20 * 100 or ran == 3000 for best, ran in steps)
    assert any(ran - best > 100 for best, ran in steps)
    for bad in (0, -5, 2.5, True):
        with pytest.raises(BnnkitError, match="thin_classifier must be a whole number"):
            SamplerRecipe(thin_classifier=bad)
        with pytest.raises(BnnkitError, match="map_patience_steps_classifier must be a whole number"):
            SamplerRecipe(map_patience_steps_classifier=bad)


def test_a_classifier_stops_its_map_phase_at_its_own_cap():
    from bnnkit.api.recipe import map_steps_cap

    r = SamplerRecipe()
    assert map_steps_cap(r, 50_000, 32) == r.map_max_steps == 60_000
    assert map_steps_cap(r, 50_000, 32, classifier=True) == r.map_max_steps_classifier == 20_000
    assert (
        map_steps_cap(SamplerRecipe(map_max_steps=60), 50_000, 32, classifier=True) == 60
    )  # short stays short
    # through fit, on 4 rows (no held-out row: each MAP phase runs its whole budget)
    recipe = SamplerRecipe(map_max_steps=40, map_max_steps_classifier=15, chains=2, burn_in=5, draws=8, thin=1,
                           check_every=4)  # fmt: skip
    x = torch.randn(4, 2, generator=torch.Generator().manual_seed(0))
    ran = {}
    for kind, y in (("classifier", torch.tensor([0, 1, 0, 1])), ("regression", torch.randn(4))):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            f = bnnkit.fit(torch.nn.Linear(2, 2 if kind == "classifier" else 1), (x, y), recipe=recipe, seed=0,
                           progress=False)  # fmt: skip
        ran[kind] = {r for _, r in f.draws.config["convergence"]["map_steps"].values()}
    assert ran == {"classifier": {15}, "regression": {40}}
