"""The optional compiled parts (stormish/_speedups.c, the crossing path's rows;
stormish/_acking.c, acking's per-tuple steps): built where a C compiler and Python's
headers are found, skipped with a warning where not. Everything they do has a
pure-Python path (stormish/rowcodec.py and stormish/runtime/fastack.py pick), so an
install never fails for want of them.
The rest of the project's metadata is in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "stormish._speedups",
            ["stormish/_speedups.c"],
            depends=["stormish/_refs.h"],
            optional=True,
            extra_compile_args=["-O2"],
        ),
        Extension(
            "stormish._acking",
            ["stormish/_acking.c"],
            depends=["stormish/_refs.h", "stormish/_roottable.h"],
            optional=True,
            extra_compile_args=["-O2"],
        ),
    ]
)
