"""Shared fixtures. The package is imported from this source tree
(PYTHONPATH=clientsdk/python, as cmd/oncejob's python_sdk_e2e_test.go runs
it) unless it was installed."""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
