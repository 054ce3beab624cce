"""Grading: a patch applied in a fresh runtime, the task's tests run and their log read.

  grading           grade_patch: one patch to a GradeResult
  grade_result      GradeResult (a Trajectory's grade)
  harness           how a task's tests are run and their log read (our pytest record)
  harness_swebench  swebench's eval scripts and log parsers; swebench_specs: swebench 4.x's
  swebench_specs      per-repository tables, for rows without an eval script
  harness_r2egym    R2E-Gym's hidden tests, run_tests.sh and parser
  patches           the paths a patch touches, and which of them the grader protects
  verdict_guards    what keeps the code under test from writing its own verdict
  task_checks       a task's self-check: the gold patch resolves it, the empty one not

Imports the core (tasks, runtime, layouts), never k8s; of docker only docker_runtime, for
grade_patch's default (`client=`: a container on that engine).
"""
