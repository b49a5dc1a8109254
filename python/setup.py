"""Builds the smrules Python package: pure Python under smrules/ and the
extension smrules._core, linked against the smrules library built by make.

Use make, not this file directly:
    make python            builds into build/python (PYTHONPATH=build/python)
    make install-python    installs for /usr/bin/python3 (see docs/python.md)
make passes SMRULES_BUILD, the folder holding libsmrules.a (built -fPIC).
"""
import os
import shlex
import subprocess

from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BUILD = os.environ.get("SMRULES_BUILD", os.path.join(ROOT, "build"))
LIB = os.path.join(BUILD, "libsmrules.a")
PKGS = "lua5.4 libcjson libprotobuf-c sqlite3 yaml-0.1 libpcre2-8 zlib"
# make SAN=1 python: the library is built with the sanitizers, so is the
# extension (it then loads only with their runtimes preloaded; Makefile).
SANFLAGS = shlex.split(os.environ.get("SMRULES_SANFLAGS", ""))


def release():
    """SMRULES_VERSION from its one place, core/include/smrules/version.h."""
    with open(os.path.join(ROOT, "core", "include", "smrules", "version.h")) as f:
        for line in f:
            if line.startswith("#define SMRULES_VERSION "):
                return line.split('"')[1]
    raise SystemExit("no SMRULES_VERSION in core/include/smrules/version.h")


def pkg_config(flag):
    out = subprocess.run(
        ["pkg-config", flag] + PKGS.split(), check=True, capture_output=True, text=True
    ).stdout
    return shlex.split(out)


core = Extension(
    "smrules._core",
    sources=["src/core_module.c", "src/trial_type.c", "src/read_ahead.c", "src/write_queue.c",
             "src/copy_pool.c"],
    include_dirs=[os.path.join(ROOT, "core"), os.path.join(ROOT, "core/include"),
                  os.path.join(BUILD, "gen")],
    extra_compile_args=["-std=c11", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Werror",
                        "-Wno-unused-parameter", "-Wno-missing-field-initializers",
                        "-Wno-cast-function-type"] + SANFLAGS + pkg_config("--cflags"),
    # The library is static and built -fPIC; --as-needed keeps the extension
    # from loading the libraries the writer does not use.
    extra_objects=[LIB],
    extra_link_args=SANFLAGS + ["-Wl,--as-needed"] + pkg_config("--libs")
    + ["-ldl", "-lpthread", "-lm"],
    depends=[LIB, os.path.join(ROOT, "core/writer/writer.h"),
             os.path.join(ROOT, "core/trial/trial.h"), "src/trial_type.h", "src/read_ahead.h",
             "src/batch_ops.h", "src/write_queue.h", "src/copy_pool.h"],
)

setup(
    name="smrules",
    version=release(),
    description="smrules from Python: smdebug's trial API and a PyTorch hook that writes trials",
    packages=["smrules", "smrules.torch"],
    package_dir={"": "."},
    ext_modules=[core],
    python_requires=">=3.9",
)
