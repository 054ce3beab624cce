"""bench/gpu.py's CPU miniature runs every section through the same subprocesses and table as the
one-shot GPU run, with ml_collections and docker unimportable (the GPU machine has neither)."""

import json
import os
import subprocess
import sys

from bench import gpu
from configs import qwen3_1p7b_1gpu
from deepswe_jax.model import Qwen3Config

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def blocking_environment(tmp_path) -> dict[str, str]:
    """PYTHONPATH first holds packages named ml_collections and docker that refuse to import."""
    for name in ("ml_collections", "docker"):
        package = tmp_path / "blocked" / name
        package.mkdir(parents=True)
        (package / "__init__.py").write_text(
            f"raise ImportError('{name} is not on the GPU machine')\n"
        )
    path = [str(tmp_path / "blocked"), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, path))}


def test_miniature_runs_every_section_without_ml_collections_or_docker(tmp_path):
    env = blocking_environment(tmp_path)
    for name in ("ml_collections", "docker"):
        probe = subprocess.run([sys.executable, "-c", f"import {name}"], env=env, check=False)
        assert probe.returncode != 0, f"{name} should be unimportable in this test"

    out = tmp_path / "gpu.json"
    # The GPU run's 460 s budget would decide this on a loaded machine; here it only stops a hang.
    result = subprocess.run(
        [sys.executable, "bench/gpu.py", "--mini", f"--out={out}", "--total_s=840"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=870,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    results = json.loads(out.read_text())["results"]
    assert {name: r["error"] for name, r in results.items()} == dict.fromkeys(gpu.SECTIONS)

    table = result.stdout
    for row in (
        "train step 128 tok: tokens/s",
        "train step 128 tok: MFU",
        "attention fwd+bwd 128 tok: pallas ms",
        "decode batch 4: new tokens/s",
        "bf16: KL(JAX, torch) mean / max",
        "bf16 vs fp32 log-probs",
        "paged attention, 4 rows to 256: ms",
        "paged sampler batch 4: new tokens/s",
    ):
        assert row in table
    train = gpu._find(results["train"]["records"], tokens=128)
    torch_train = gpu._find(results["torch"]["records"], tokens=128)
    assert train["tokens_per_s"] > 0 and torch_train["tokens_per_s"] > 0
    pallas = gpu._find(results["attention"]["records"], tokens=128, impl="pallas")
    assert pallas["max_diff_vs_xla"] < 0.05  # bf16 inputs
    numerics = gpu._find(results["numerics"]["records"])
    assert numerics["kl_jax_torch_mean"] < 1e-3 and numerics["logprob_abs_diff_max"] < 0.1
    # The Pallas paged kernel (interpret mode here) against the XLA gather, and the paged
    # sampler reading through it against the dense one (bf16: a near tie may flip a token).
    kernel = gpu._find(results["paged"]["records"], part="kernel", attention="pallas")
    assert kernel["ms"] > 0 and kernel["max_diff_vs_xla"] < 0.05
    paged = gpu._find(results["paged"]["records"], part="sampler", cache="paged")
    assert paged["tokens_per_s"] > 0 and paged["same_greedy_rows"] >= 0.5
    decode = gpu._find(results["decode"]["records"], side="torch")
    assert decode["tokens_per_s"] > 0 and decode["same_greedy_rows"] >= 0.5


def test_benchmarked_shape_is_the_one_gpu_configs_model():
    config = qwen3_1p7b_1gpu.get_config()
    want = Qwen3Config.from_hf_dict(config.model.to_dict())
    assert Qwen3Config.from_hf_dict(gpu.QWEN3_1P7B) == want
