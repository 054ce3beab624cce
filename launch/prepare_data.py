"""Write DeepSWE's training set from a local copy of R2E-Gym-Subset.

    python launch/prepare_data.py --r2e_gym=/data/R2E-Gym-Subset/train.parquet --out_dir=/data/deepswe

Reads the rows (a parquet file or a `datasets` save_to_disk folder), drops those of
repositories SWE-bench Verified evaluates (deepswe_jax.env.training_data), and writes
`<out_dir>/train.jsonl` (task rows: train with --config.env.tasks=<out_dir>/train.jsonl) and
`<out_dir>/images.txt` (one image per line: launch/k8s_manifests.py --images=... pre-pulls them).
"""

import json
import os
import sys
import time
from pathlib import Path

# Run as a script (python launch/prepare_data.py), the repository root is not on sys.path.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from deepswe_jax import interrupts  # noqa: E402

interrupts.install()  # before the heavy imports: Ctrl-C while they load ends in one line

from absl import app, flags  # noqa: E402

from deepswe_jax import cli  # noqa: E402
from deepswe_jax.env.tasks import read_rows  # noqa: E402
from deepswe_jax.env.training_data import training_set  # noqa: E402

_R2E_GYM = flags.DEFINE_string(
    "r2e_gym", None, "R2E-Gym-Subset rows: a .parquet file or a datasets save_to_disk folder."
)
_OUT_DIR = flags.DEFINE_string("out_dir", None, "Folder for train.jsonl and images.txt.")


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments {argv[1:]}")
    started = time.monotonic()
    source = Path(_R2E_GYM.value).expanduser()
    if not source.exists():
        raise app.UsageError(
            f"--r2e_gym={source} does not exist; download R2E-Gym-Subset first, e.g. "
            "datasets.load_dataset('R2E-Gym/R2E-Gym-Subset', split='train').save_to_disk(DIR)"
        )
    rows = read_rows(source)
    print(f"read {len(rows)} rows from {source}", flush=True)
    result = training_set(rows, progress=lambda n: print(f"  {n}/{len(rows)} rows", flush=True))
    out_dir = Path(_OUT_DIR.value)
    out_dir.mkdir(parents=True, exist_ok=True)
    with (out_dir / "train.jsonl").open("w", encoding="utf-8") as f:
        for task in result.tasks:
            f.write(json.dumps(task.to_row(), ensure_ascii=False) + "\n")
    (out_dir / "images.txt").write_text("".join(f"{image}\n" for image in result.images))
    print(result.summary())
    print(
        f"wrote {out_dir / 'train.jsonl'} and {out_dir / 'images.txt'} "
        f"({len(result.images)} images) in {time.monotonic() - started:.1f} s"
    )


if __name__ == "__main__":
    flags.mark_flags_as_required(["r2e_gym", "out_dir"])
    cli.run(main)
