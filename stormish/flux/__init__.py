"""Flux YAML topologies (stub until the parser lands)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import TopologyFileError


def load_flux(path: Path, **options: Any) -> Any:
    raise TopologyFileError(f"{path}: Flux files are not supported yet")
