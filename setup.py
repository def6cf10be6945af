"""`pip install .`: the Python module lingbot_map, built by the project's CMake.

setuptools only packs what CMake builds (the target lingbot_map_python, whose
output is BUILD/python/lingbot_map.*.so). BUILD is, in this order:
  * $LINGBOT_BUILD_DIR, if set;
  * build/ of this checkout, if it is configured (the README's build), so an
    install after the normal build relinks nothing and takes seconds;
  * build-pip/, configured here with the tests, benchmarks and examples off.
No download happens: every dependency is a Debian package (scripts/setup.sh).
"""

import os
import pathlib
import re
import shutil
import subprocess
import sys
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = pathlib.Path(__file__).resolve().parent


def project_version():
    cmake = (ROOT / "CMakeLists.txt").read_text()
    return re.search(r"project\(lingbot_map VERSION ([0-9.]+)", cmake).group(1)


def cmake_build_dir():
    if os.environ.get("LINGBOT_BUILD_DIR"):
        return pathlib.Path(os.environ["LINGBOT_BUILD_DIR"]).resolve()
    if (ROOT / "build" / "CMakeCache.txt").exists():
        return ROOT / "build"
    return ROOT / "build-pip"


class CMakeBuild(build_ext):
    """Builds the module with CMake and copies it where setuptools packs it."""

    def build_extension(self, ext):
        build = cmake_build_dir()
        if not (build / "CMakeCache.txt").exists():
            generator = ["-G", "Ninja"] if shutil.which("ninja") else []
            subprocess.run(["cmake", "-S", str(ROOT), "-B", str(build), *generator, "-DCMAKE_BUILD_TYPE=Release",
                            "-DLINGBOT_TESTS=OFF", "-DLINGBOT_BENCH=OFF", "-DLINGBOT_EXAMPLES=OFF",
                            "-DLINGBOT_PYTHON=ON", f"-DPython3_EXECUTABLE={sys.executable}"], check=True)
        subprocess.run(["cmake", "--build", str(build), "--target", "lingbot_map_python"], check=True)
        suffix = sysconfig.get_config_var("EXT_SUFFIX")
        built = build / "python" / f"lingbot_map{suffix}"
        if not built.exists():
            found = sorted(p.name for p in (build / "python").glob("lingbot_map*"))
            raise RuntimeError(f"{build}: no lingbot_map{suffix} for this Python ({sys.executable}); found {found}. "
                               f"Set LINGBOT_BUILD_DIR to a build configured with -DPython3_EXECUTABLE={sys.executable}")
        target = pathlib.Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built, target)


# setuptools' own scratch files go under the CMake build folder, not into the checkout.
scratch = cmake_build_dir() / "setuptools"
scratch.mkdir(parents=True, exist_ok=True)
setup(
    version=project_version(),
    ext_modules=[Extension("lingbot_map", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    options={"build": {"build_base": str(scratch)}, "egg_info": {"egg_base": str(scratch)}},
    zip_safe=False,
)
