"""Sources of the images tests/env/test_layouts.py builds; their repositories' own tests are
not this project's tests."""

collect_ignore_glob = ["*"]
