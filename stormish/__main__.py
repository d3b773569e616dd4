"""`python -m stormish ...`: the `stormish` command, where its script is not on PATH (a
virtualenv not activated). Guarded: a worker started by spawn imports this module again
(as `__mp_main__`), and must not run the command a second time."""

from .cli import main

if __name__ == "__main__":
    main(prog_name="stormish")
