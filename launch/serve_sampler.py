"""A sampler process for disaggregated rollouts: follows the trainer's checkpoints, serves HTTP.

  python launch/serve_sampler.py --config=configs/tiny.py \
      --checkpoint_dir=/tmp/tiny_run/checkpoints --port=8470 --mesh=1,-1,1

On this process's own devices (the --mesh shape, any shape; the trainer's may differ) it
serves the newest finished checkpoint step (deepswe_jax.sampling.checkpoint_follower), polling
every --poll_interval_s, and reports the version it serves in --status_file and on HTTP:

  GET  /status    -> {"policy_version": 12, "checkpoint": ".../checkpoints/12"}
  POST /generate  {"prompts": [[ids...], ...], "max_new_tokens": 64, "temperature": 1.0,
                   "top_p": 1.0, "top_k": 0, "stop_token_ids": [...]}
               -> {"policy_version": 12, "completions": [{"token_ids", "logprobs",
                   "finish_reason"}, ...]}

The trainer never waits on this process: it keeps saving checkpoints, and data sampled here
carries the version it came from for the trainer's max_staleness bound.
"""

import asyncio
import json
import logging
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# Run as a script (python launch/serve_sampler.py), the repository root is not on sys.path.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from deepswe_jax import interrupts  # noqa: E402

interrupts.install()  # before the heavy imports: Ctrl-C while they load ends in one line

from absl import app, flags  # noqa: E402
from absl import logging as absl_logging  # noqa: E402
from ml_collections import config_flags  # noqa: E402

from deepswe_jax import cli  # noqa: E402

_CONFIG = config_flags.DEFINE_config_file(
    "config", None, "The trainer's experiment config (model architecture, sampler, agent limits)."
)
_CHECKPOINT_DIR = flags.DEFINE_string(
    "checkpoint_dir", None, "The trainer's checkpoint directory (<workdir>/checkpoints)."
)
_MESH = flags.DEFINE_list("mesh", ["1", "-1", "1"], "data,fsdp,tensor over this process's devices.")
_PORT = flags.DEFINE_integer("port", 8470, "HTTP port (0: serve no HTTP, only follow).")
_STATUS_FILE = flags.DEFINE_string(
    "status_file", None, "Where the served policy version is written (json)."
)
_POLL_INTERVAL = flags.DEFINE_float("poll_interval_s", 5.0, "Seconds between checkpoint polls.")
_WAIT = flags.DEFINE_float("wait_s", 3600.0, "How long to wait for the first checkpoint.")


def make_handler(follower) -> type[BaseHTTPRequestHandler]:
    from deepswe_jax.sampling.base import GenerateRequest, SamplingParams

    class Handler(BaseHTTPRequestHandler):
        def _reply(self, code: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path != "/status":
                self._reply(404, {"error": "GET /status or POST /generate"})
                return
            version = follower.policy_version
            checkpoint = str(follower.checkpoint_dir / str(version))
            self._reply(200, {"policy_version": version, "checkpoint": checkpoint})

        def do_POST(self) -> None:
            if self.path != "/generate":
                self._reply(404, {"error": "GET /status or POST /generate"})
                return
            try:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                params = SamplingParams(
                    temperature=float(body.get("temperature", 1.0)),
                    top_p=float(body.get("top_p", 1.0)),
                    top_k=int(body.get("top_k", 0)),
                    max_new_tokens=int(body["max_new_tokens"]),
                    stop_token_ids=tuple(body.get("stop_token_ids", ())),
                )
                requests = [GenerateRequest(tuple(p), params) for p in body["prompts"]]
            except (KeyError, TypeError, ValueError) as error:
                self._reply(400, {"error": f"bad request ({error}); see launch/serve_sampler.py"})
                return
            version = follower.policy_version
            completions = asyncio.run(follower.sampler.generate(requests))
            self._reply(
                200,
                {
                    "policy_version": version,
                    "completions": [
                        {
                            "token_ids": list(c.token_ids),
                            "logprobs": list(c.logprobs),
                            "finish_reason": c.finish_reason,
                        }
                        for c in completions
                    ],
                },
            )

    return Handler


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments {argv[1:]}; overrides look like --config.x=y")
    absl_logging.set_verbosity(absl_logging.WARNING)
    logging.getLogger("deepswe_jax").setLevel(logging.INFO)
    import jax

    from deepswe_jax.experiment import checkpoint_follower
    from deepswe_jax.parallel import make_mesh

    data, fsdp, tensor = (int(size) for size in _MESH.value)
    mesh = make_mesh(data, fsdp, tensor, devices=jax.local_devices())
    follower = checkpoint_follower(
        _CONFIG.value, _CHECKPOINT_DIR.value, mesh, status_file=_STATUS_FILE.value
    )
    stop = threading.Event()
    try:
        follower.wait_for_first(_WAIT.value, interval_s=min(_POLL_INTERVAL.value, 1.0))
        if _PORT.value:
            server = ThreadingHTTPServer(("", _PORT.value), make_handler(follower))
            threading.Thread(target=server.serve_forever, daemon=True).start()
            logging.getLogger("deepswe_jax").info("serving on port %d", _PORT.value)
        follower.follow(stop, _POLL_INTERVAL.value)
    finally:
        stop.set()
        follower.close()


if __name__ == "__main__":
    flags.mark_flags_as_required(["config", "checkpoint_dir"])
    cli.run(main)
