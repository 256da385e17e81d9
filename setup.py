"""The optional C speedups (toolwire/protocols/_speedups.c); the rest is pyproject.toml.

``optional=True``: without a C compiler the install still succeeds and the
pure-Python paths run (slower, same results); ``./scripts/install`` says so and
tests/unit/test_speedups.py fails on it.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "toolwire.protocols._speedups",
            ["src/toolwire/protocols/_speedups.c"],
            optional=True,
        )
    ]
)
