"""bench/gpt.py on its tiny config: jitad's GPT step (the JAX program renamed) agrees with
JAX's and PyTorch's, and the benchmark's own entry point runs."""
import numpy as np
import pytest

from bench import gpt

jax = pytest.importorskip("jax")


@pytest.fixture(scope="module")
def tiny():
    cfg = gpt.CONFIGS["tiny"]
    return cfg, gpt.init_params(cfg), gpt.batches(cfg, 2)


def test_one_step_loss_and_update_agree_with_jax(tiny):
    import jitad
    cfg, params, data = tiny
    trainers = {name: gpt.FunctionalTrainer(module, cfg, params) for name, module in (("jitad", jitad), ("jax", jax))}
    losses = {name: [tr.sync(tr.step(*b)) for b in data] for name, tr in trainers.items()}
    assert losses["jitad"][0] == pytest.approx(np.log(cfg["vocab"]), rel=0.05)   # untrained: about uniform
    np.testing.assert_allclose(losses["jitad"], losses["jax"], rtol=1e-5)
    before = gpt.flatten(params)
    after = {name: gpt.flatten(tr.state[0]) for name, tr in trainers.items()}
    assert after["jitad"].keys() == after["jax"].keys() == before.keys()
    for key, w in after["jax"].items():   # the updates, as norms: AdamW moves a weight whose gradient
        change = w - before[key]          # is rounding noise (the key bias's) by a noise-signed step
        assert np.linalg.norm(after["jitad"][key] - w) <= 1e-3 * np.linalg.norm(change), key
    assert all(np.asarray(tr.state[0]["wte"]).dtype == np.float32 for tr in trainers.values())


def test_gradients_agree_with_jax_and_torch(tiny):
    import jitad
    pytest.importorskip("torch")
    cfg, params, data = tiny
    report = gpt.check_agreement(cfg, params, {"jax": gpt.FunctionalTrainer(jax, cfg, params),
                                               "jitad": gpt.FunctionalTrainer(jitad, cfg, params),
                                               "torch": gpt._make("torch", cfg, params, None)}, steps=1)
    for name in ("jitad", "torch"):
        assert report[name]["loss"] <= 1e-5 and report[name]["grad"] <= 1e-4, (name, report[name])


def test_gemm_shapes_count_forward_and_backward():
    cfg = gpt.CONFIGS["tiny"]
    shapes = gpt.gemm_shapes(cfg)
    assert len(shapes) == 3 * (6 * cfg["n_layer"] + 1)
    flops = sum(2 * m * n * k * int(np.prod(bd)) for bd, m, k, n, _, _ in shapes)
    B, T, C = cfg["batch"], cfg["block"], cfg["n_embd"]
    per_layer = 2 * B * T * C * (3 * C + C + 8 * C) + 2 * 2 * B * T * T * C
    assert flops == 3 * (cfg["n_layer"] * per_layer + 2 * B * T * C * cfg["vocab"])


def test_summary_gives_ratios_to_jitad_and_both_first_call_clocks():
    times = {"jitad": [0.010, 0.012, 0.011], "jax": [0.022, 0.020, 0.024], "GEMM floor": [0.005, 0.006, 0.004]}
    rows = gpt.summary(times, {"jitad": (3.5, 2.25), "jax": (4.0, 5.5)}).splitlines()
    assert "CPU" in rows[0]
    jitad_row, jax_row, floor_row = (r.split() for r in rows[1:])
    assert jitad_row[0] == "jitad" and float(jitad_row[1]) == 11.0 and float(jitad_row[-3]) == 1.0
    assert float(jax_row[-3]) == 0.5 and jax_row[-2:] == ["4.00", "5.50"]
    assert float(floor_row[-3]) == 2.2 and floor_row[-2:] == ["nan", "nan"]


def test_ab_steps_compiles_each_setup_apart(tiny):
    """Two setups of a lowering switch (the programs print alike) run their own code, and
    the switch is left as the first setup set it."""
    from jitad.lower import tensor
    cfg, params, _ = tiny
    setups = gpt._ab_setups("jitad.lower.tensor.TILES_READ_A_TRANSPOSED=False")
    times, trainers = gpt.ab_steps(cfg, params, setups, rounds=2, steps=1)
    assert list(times) == ["as is", "TILES_READ_A_TRANSPOSED=False"] and all(len(t) == 2 and min(t) > 0
                                                                              for t in times.values())
    calls = {name: tr.step_fn.llvm_ir.count("call void @scipy_cblas_sgemm64_") for name, tr in trainers.items()}
    assert calls["as is"] == 0 and calls["TILES_READ_A_TRANSPOSED=False"] > 0   # the weight gradients: BLAS's tn
    assert tensor.TILES_READ_A_TRANSPOSED is True
    losses = {name: [tr.sync(tr.step(*b)) for b in gpt.batches(cfg, 2)] for name, tr in trainers.items()}
    np.testing.assert_allclose(losses["TILES_READ_A_TRANSPOSED=False"], losses["as is"], rtol=1e-5)
    lines = gpt.ab_summary(times).splitlines()
    assert lines[0].split()[:2] == ["as", "is"] and "1.000 (1.000-1.000)" in lines[0]
