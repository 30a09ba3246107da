"""Build of kstreams' compiled core.

The Cython sources live under ``csrc/kstreams/_native`` so that the package path is mirrored and
cross-module ``cimport`` works (flat ``.pxd`` files build but fail at import). Every module is C++
so the kernels can use the standard containers without the GIL.

``KSTREAMS_NATIVE=a,b`` builds only the named modules (a development convenience when one module
is being edited); ``KSTREAMS_ANNOTATE=1`` writes Cython's HTML annotation next to each source;
``KSTREAMS_DEBUG=1`` builds without optimisation and with Cython's line tracing for profilers.

Modules are translated and compiled in parallel, one job per CPU (``KSTREAMS_BUILD_JOBS`` sets
another count), so ``pip install .`` does not compile them one after another.
"""

from __future__ import annotations

import os

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

NATIVE_MODULES = [
    "record",
    "value_and_timestamp",
    "record_batch",
    "record_buffer",
    "scheduler",
    "record_collector",
    "record_cache",
    "store_core",
    "store_access",
    "python_chain",
    "e2e_latency",
    "per_record",
    "kernels",
    "kafka_clients",
]

only = {n for n in os.environ.get("KSTREAMS_NATIVE", "").split(",") if n}
debug = os.environ.get("KSTREAMS_DEBUG") == "1"


def _build_jobs() -> int:
    """Parallel build jobs: KSTREAMS_BUILD_JOBS when set, else one per CPU."""
    value = os.environ.get("KSTREAMS_BUILD_JOBS", "").strip()
    if not value:
        return os.cpu_count() or 1
    if not value.isdigit() or int(value) < 1:
        raise SystemExit(f"KSTREAMS_BUILD_JOBS must be a whole number of jobs, at least 1; got {value!r}")
    return int(value)


jobs = _build_jobs()
compile_args = ["-O0", "-g"] if debug else ["-O3"]
compile_args += ["-std=c++17", "-Wno-unused-function", "-Wno-deprecated-declarations"]

extensions = [
    Extension(
        f"kstreams._native.{name}",
        [f"csrc/kstreams/_native/{name}.pyx"],
        include_dirs=["csrc", numpy.get_include()],
        # the fetcher looks librdkafka's functions up with dlopen/dlsym (in libdl before glibc 2.34)
        libraries=["dl"] if name == "kafka_clients" else [],
        language="c++",
        extra_compile_args=compile_args,
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")]
        + ([("CYTHON_TRACE_NOGIL", "1")] if debug else []),
    )
    for name in NATIVE_MODULES
    if not only or name in only
]

setup(
    ext_modules=cythonize(
        extensions,
        include_path=["csrc"],
        language_level="3",
        nthreads=jobs,
        annotate=os.environ.get("KSTREAMS_ANNOTATE") == "1",
        compiler_directives={
            "boundscheck": debug,
            "wraparound": False,
            "cdivision": True,
            "embedsignature": True,
            "linetrace": debug,
        },
    ),
    # build_ext's -j: a command-line -j still overrides it.
    options={"build_ext": {"parallel": jobs}},
)
