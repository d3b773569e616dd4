"""Output locations: a plain path or a `file:` URI is a local directory; any other URI
(`s3a://`, `hdfs://`, ...) is left to Spark's writers."""

from __future__ import annotations

import os
from urllib.parse import unquote, urlparse


def is_uri(path: str) -> bool:
    return "://" in path


def local_or_uri(path: str) -> str:
    """`path` made absolute when local (`file:///x`, `file:/x` and `/x` alike), a
    non-file URI unchanged. A `file:` URI naming another host is refused: it is not a
    path this process can write."""
    if path.startswith("file:"):
        parsed = urlparse(path)
        if parsed.netloc not in ("", "localhost"):
            raise ValueError(f"file URI {path!r} names host {parsed.netloc!r}; give a local path")
        return os.path.abspath(unquote(parsed.path))
    return path if is_uri(path) else os.path.abspath(path)
