"""Unit tests of logic (no Spark started): session options and the import layering."""

from __future__ import annotations

import subprocess
import sys

from stormish.spark.session import CONF_PREFIX, DEFAULT_MASTER, MASTER_KEY, spark_options


def test_defaults_are_local_private_and_small():
    master, opts = spark_options(None)
    assert master == DEFAULT_MASTER == "local[*]"
    assert opts["spark.driver.host"] == opts["spark.driver.bindAddress"] == "127.0.0.1"
    assert opts["spark.ui.enabled"] == "false"
    assert opts["spark.sql.shuffle.partitions"] == "4"
    assert opts["spark.sql.execution.arrow.pyspark.enabled"] == "true"


def test_master_and_conf_entries_pass_through():
    master, opts = spark_options(
        {
            MASTER_KEY: "spark://10.0.0.5:7077",
            CONF_PREFIX + "spark.executor.memory": "2g",
            CONF_PREFIX + "spark.ui.enabled": True,
            CONF_PREFIX + "spark.sql.shuffle.partitions": 8,
            "topology.workers": 2,
        }
    )
    assert master == "spark://10.0.0.5:7077"
    assert opts["spark.executor.memory"] == "2g"
    assert opts["spark.ui.enabled"] == "true"
    assert opts["spark.sql.shuffle.partitions"] == "8"
    assert "topology.workers" not in opts


def test_connect_gets_only_the_given_conf():
    master, opts = spark_options(
        {MASTER_KEY: "sc://localhost:15002", CONF_PREFIX + "spark.sql.ansi.enabled": "true"}
    )
    assert master == "sc://localhost:15002"
    assert opts == {"spark.sql.ansi.enabled": "true"}


def test_importing_stormish_and_the_spark_package_loads_no_spark():
    code = (
        "import sys, stormish, stormish.spark\n"
        "from stormish.spark import SparkSpout, SparkSink\n"
        "SparkSink('/tmp/x'); SparkSpout('t', fields=['a'])\n"
        "heavy = [m for m in sys.modules if m.split('.')[0] in "
        "('pyspark', 'pyarrow', 'pandas', 'numpy', 'py4j')]\n"
        "print(heavy)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout
    assert out.strip() == "[]"


def test_nothing_outside_stormish_spark_imports_it():
    import pathlib
    import re

    import stormish

    imports = re.compile(r"^\s*(from|import)\s+(pyspark|stormish\.spark|\.+spark)\b", re.M)
    root = pathlib.Path(stormish.__file__).parent
    offenders = [
        str(p.relative_to(root))
        for p in root.rglob("*.py")
        if p.relative_to(root).parts[0] != "spark" and imports.search(p.read_text())
    ]
    assert offenders == []
