"""Spark settings for the suite's tiny inputs, shared by conftest.py and tests that start their own Spark."""

# Test inputs are tiny: there, compiling whole-stage code and re-planning each stage cost more
# than they save (a demo update takes about 12% less), and so does compiling each expression:
# `codegen.factoryMode` NO_CODEGEN evaluates them interpreted, the mode Spark's own test suites
# check against codegen (about 10% less again). None changes what a query means, and the
# suite's assertions hold under all; `make demo` and the benchmarks keep codegen and AQE on.
TINY_DATA = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}
