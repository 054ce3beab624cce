"""Docker: episodes and gradings in containers on one or more Docker engines.

  docker_runtime, docker_channel   DockerRuntime(Factory): a container with tool_server.py as PID 1,
                                   and the exec channel to it
  docker_api, hosts, placement     API calls, the engines (DockerHosts) and the pool's placement on
                                   them (DockerPlacement; FactoryPlacement for any RuntimeFactory)
  images, official_images          task images from a task's source; images in SWE-bench's and
                                   R2E-Gym's layouts (official_images)
  disk_limits                      how a container's disk use is bounded (DISK_LIMIT_MODES)
  settings                         DockerSettings: EnvPool's Docker hosts and container limits
  conda_standin/                   the stand-in for conda copied into official images

Imports the core (runtime, ownership, tasks, tools), never grading nor k8s.
"""
