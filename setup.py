"""The optional compiled part (stormish/_speedups.c): built where a C compiler and
Python's headers are found, skipped with a warning where not. Everything it does has a
pure-Python path (stormish/rowcodec.py picks), so an install never fails for want of it.
The rest of the project's metadata is in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "stormish._speedups",
            ["stormish/_speedups.c"],
            optional=True,
            extra_compile_args=["-O2"],
        )
    ]
)
