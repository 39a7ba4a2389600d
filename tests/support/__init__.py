"""Helpers the tests share: generated models, the test hub, harnesses, cached clients (no tests here)."""
