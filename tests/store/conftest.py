"""The Spark session every Spark test module shares (one JVM per test run: starting one costs
10-30 s here), started as `tracehouse` starts it, with a `spark-defaults.conf` of our own in
$SPARK_CONF_DIR (the cluster settings file the Spark docs page names: a test checks it is read)."""

from __future__ import annotations

import os
import shutil

import pytest

DEFAULTS_KEY, DEFAULTS_VALUE = "spark.tracehouse.fromdefaults", "read-from-spark-defaults.conf"


@pytest.fixture(scope="session")
def spark_defaults() -> tuple[str, str]:
    """(key, value) the session's spark-defaults.conf sets."""
    return DEFAULTS_KEY, DEFAULTS_VALUE


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    if shutil.which("java") is None:  # `make setup` installs one (java-tool); say so when it could not
        pytest.skip("the Spark engine needs Java 17+ (make setup installs openjdk-17-jre-headless)")
    pytest.importorskip("pyspark", reason="pyspark (the spark extra) is not installed: make setup installs it")
    from tracehouse.store.spark import spark_session

    conf_dir = tmp_path_factory.mktemp("spark-conf")
    (conf_dir / "spark-defaults.conf").write_text(f"{DEFAULTS_KEY}  {DEFAULTS_VALUE}\n")
    old = os.environ.get("SPARK_CONF_DIR")
    os.environ["SPARK_CONF_DIR"] = str(conf_dir)
    try:
        s = spark_session("local[2]")
    finally:
        if old is None:
            os.environ.pop("SPARK_CONF_DIR", None)
        else:
            os.environ["SPARK_CONF_DIR"] = old
    yield s
    s.stop()
