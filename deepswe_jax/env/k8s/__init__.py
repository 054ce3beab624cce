"""Kubernetes: episodes and gradings in pods (`K8sPodFactory`, a RuntimeFactory).

  k8s_runtime   K8sPodFactory and K8sRuntime: a pod per runtime, its API calls retried
  k8s_pods      K8sPodSettings, the pod manifest, API calls on pods (retries, stale clean-up)
  k8s_exec      commands and files in a pod over the API server's exec websocket

Imports the core (runtime, ownership, tools), never grading nor docker.
"""
