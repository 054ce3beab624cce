"""Grading: a patch applied in a fresh runtime, the task's tests run and their log read.

  grading                      grade_patch: one patch to a GradeResult
  grade_result                 GradeResult (a Trajectory's grade)
  harness, harness_swebench,   how a task's tests are run and parsed (our pytest record,
  harness_r2egym, swebench_specs   swebench's eval scripts and log parsers, R2E-Gym's runner)
  patches, verdict_guards      protected paths and what keeps code under test from writing its verdict
  task_checks                  a task's self-check: the gold patch resolves it, the empty one not

Imports the core (tasks, runtime, layouts), never k8s; of docker only docker_runtime, for
grade_patch's default (`client=`: a container on that engine).
"""
