"""What an EnvPool needs to know only when its runtimes are Docker containers (`DockerSettings`,
built from config.env by the composition root, `experiment.settings.docker_settings`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DockerSettings:
    """The Docker engines an EnvPool places containers on, and the limits of those containers.

    hosts: engine endpoints (unix://, tcp://, ssh://); empty: EnvPool's `client`, else the
      local engine ($DOCKER_HOST).
    envs_per_host: most containers per Docker host (0: no cap beyond max_envs).
    host_wait_timeout: seconds a start waits while no Docker host answers, then fails.
    mem_limit, nano_cpus, pids_limit: limits of the containers of episodes (gradings get
      grading.GRADING_MEM_LIMIT).
    disk_limit, disk_limit_mode: what containers, of episodes and gradings, may write to disk
      and how that is enforced ('10g', '64m'; '': no limit; disk_limits.DISK_LIMIT_MODES).
    """

    hosts: tuple[str, ...] = ()
    envs_per_host: int = 0
    host_wait_timeout: float = 300.0
    mem_limit: str = "1g"
    nano_cpus: int = 1_000_000_000
    pids_limit: int = 256
    disk_limit: str = ""
    disk_limit_mode: str = "auto"
