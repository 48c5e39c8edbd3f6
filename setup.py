"""Builds ucxx_go's extension: the Go core, bound to CPython by gopy.

`pip install .` runs this. The extension ucxx_go._pybridge is one shared library that
gopy produces from the Go package ./pybridge; it links against libucp from the
libucx wheel (a build requirement and a runtime dependency) and finds it at run time
through ucxx_go's preload of libucx and, failing that, an $ORIGIN-relative RUNPATH.

Needs Go (1.24 or later, for go.mod's tool directive) on PATH at build time only.
"""

import glob
import os
import shutil
import subprocess
import sys
import tempfile

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


class GoExtension(Extension):
    """An extension built by gopy from a Go package instead of from C sources."""

    def __init__(self, name, go_package):
        super().__init__(name, sources=[])
        self.go_package = go_package


class BuildGoExtension(build_ext):
    def build_extension(self, ext):
        if not isinstance(ext, GoExtension):
            return super().build_extension(ext)
        import libucx

        ucx = os.path.dirname(os.path.abspath(libucx.__file__))
        go = shutil.which("go")
        if go is None:
            raise RuntimeError("building ucxx-go needs Go (https://go.dev/dl) on PATH")
        work = tempfile.mkdtemp(prefix="ucxx-go-build-")
        os.makedirs(os.path.join(ROOT, "build"), exist_ok=True)
        gen = None
        # gopy builds its generated package with -mod=mod, which rewrites go.mod (it
        # lists gopy as a direct dependency): a build must leave the checkout as it was.
        saved = {f: open(os.path.join(ROOT, f), "rb").read() for f in ("go.mod", "go.sum")}
        try:
            bindir = os.path.join(work, "bin")
            env = dict(os.environ)
            env.update(
                PATH=bindir + os.pathsep + env.get("PATH", ""),
                CGO_ENABLED="1",
                # The first, plain `go build` that gopy runs reads these...
                CGO_CFLAGS=f"-I{ucx}/include",
                CGO_LDFLAGS=f"-L{ucx}/lib",
                # ...its final link replaces CGO_* with its own, adding these.
                GOPY_INCLUDE=f"{ucx}/include",
                GOPY_LIBDIR=f"{ucx}/lib",
                CGO_LDFLAGS_ALLOW="-fwrapv",
            )
            # gopy and goimports are tool dependencies pinned in go.mod.
            for tool in ("github.com/go-python/gopy", "golang.org/x/tools/cmd/goimports"):
                name = tool.rsplit("/", 1)[-1]
                self._run([go, "build", "-o", os.path.join(bindir, name), tool], env)
            # The generated Go package must sit inside this module to import ./pybridge.
            gen = tempfile.mkdtemp(prefix="gopy-", dir=os.path.join(ROOT, "build"))
            self._run(
                [
                    os.path.join(bindir, "gopy"), "build",
                    f"-output={gen}", f"-vm={sys.executable}", "-dynamic-link=true",
                    "-build-tags=ucxx_wheel", "-name=pybridge", "-no-make=true",
                    ext.go_package,
                ],
                env,
            )
            built = glob.glob(os.path.join(gen, "_pybridge*.so"))
            if len(built) != 1:
                raise RuntimeError(f"gopy produced {built!r}, expected one _pybridge*.so")
            target = self.get_ext_fullpath(ext.name)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copyfile(built[0], target)
            _write_git_commit(os.path.join(os.path.dirname(target), "_git_commit.py"))
        finally:
            shutil.rmtree(work, ignore_errors=True)
            if gen is not None:
                shutil.rmtree(gen, ignore_errors=True)
            for f, data in saved.items():
                with open(os.path.join(ROOT, f), "wb") as out:
                    out.write(data)

    def _run(self, cmd, env):
        print("+", " ".join(cmd), flush=True)
        proc = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        print(proc.stdout, flush=True)
        if proc.returncode != 0:
            raise RuntimeError(f"{cmd[0]} failed ({proc.returncode}):\n{proc.stdout}")


def _write_git_commit(path):
    """Record the commit this build comes from, for ucxx_go.__git_commit__ (as UCXX's):
    empty when the source is not a git checkout."""
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                                timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    with open(path, "w") as out:
        out.write(f'"""Written by setup.py at build time."""\n\nGIT_COMMIT = "{commit}"\n')


setup(
    ext_modules=[GoExtension("ucxx_go._pybridge", "./pybridge")],
    cmdclass={"build_ext": BuildGoExtension},
)
