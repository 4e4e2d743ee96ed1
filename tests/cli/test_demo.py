import math

from bnnkit.cli.main import main
from bnnkit.data.toy import load_toy1d


def test_embedded_data_loads():
    X, y = load_toy1d()
    assert X.shape == (40, 1) and y.shape == (40,)


def test_demo_runs_end_to_end_and_writes_png(tmp_path, capsys):
    out = tmp_path / "demo.png"
    rc = main(
        [
            "demo",
            "--out",
            str(out),
            "--chains",
            "2",
            "--samples",
            "20",
            "--warmup",
            "30",
            "--leapfrog",
            "5",
            "--no-progress",
            "--threads",
            "1",
        ]
    )
    assert rc == 0
    assert out.exists() and out.stat().st_size > 10_000
    text = capsys.readouterr().out
    for word in ("RMSE", "NLL", "acceptance rate", "R-hat", "ESS"):
        assert word in text


def test_demo_metrics_are_finite(tmp_path):
    from bnnkit.cli.demo import run_demo

    m = run_demo(
        out=str(tmp_path / "d.png"),
        num_chains=2,
        num_samples=20,
        num_warmup=30,
        num_steps=5,
        threads=1,
        progress=False,
    )
    for key in ("train_rmse", "test_nll", "rhat_max_f", "ess_min_f", "acceptance_rate"):
        assert math.isfinite(m[key]), key
