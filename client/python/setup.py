"""Builds attn_client with its gRPC stubs generated from the repository's proto/ by grpcio-tools,
and the report's definition, client/report_spec.json (which attn-client compiles in), as package
data.

The stubs are written into the build tree only (never into src/, never committed), under the
private package attn_client._proto: protoc sees each file under the virtual path
attn_client/_proto/<path>, so the generated imports stay inside attn_client and no top-level
`attention` package is installed. The protos are found in $ATTN_PROTO_DIR, in proto/ beside
this file (an sdist carries a copy there), or in the repository's proto/ two levels up (pip's
in-tree build of ./client/python); the report spec beside this file (an sdist) or one level up.
"""
import os
import pathlib
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = pathlib.Path(__file__).resolve().parent
PROTOS = ("attention/v1/attention.proto", "grpc/health/v1/health.proto")
PACKAGE = "attn_client/_proto"
REPORT_SPEC = "report_spec.json"


def proto_root() -> pathlib.Path:
    candidates = [os.environ.get("ATTN_PROTO_DIR"), HERE / "proto", HERE.parent.parent / "proto"]
    for c in candidates:
        if c and all((pathlib.Path(c) / p).is_file() for p in PROTOS):
            return pathlib.Path(c)
    raise SystemExit(f"attn_client: no {PROTOS[0]} under $ATTN_PROTO_DIR, {HERE / 'proto'} or "
                     f"{HERE.parent.parent / 'proto'}; build from the attn repository (pip install ./client/python)")


def report_spec() -> pathlib.Path:
    for c in (HERE / REPORT_SPEC, HERE.parent / REPORT_SPEC):
        if c.is_file():
            return c
    raise SystemExit(f"attn_client: no {REPORT_SPEC} in {HERE} or {HERE.parent}; build from the attn repository "
                     "(pip install ./client/python)")


def generate_stubs(out_dir: pathlib.Path) -> None:
    from grpc_tools import protoc  # a build requirement (pyproject.toml)
    import grpc_tools

    root = proto_root()
    well_known = pathlib.Path(grpc_tools.__file__).parent / "_proto"
    args = ["grpc_tools.protoc", f"-I{PACKAGE}={root}", f"-I{well_known}",
            f"--python_out={out_dir}", f"--pyi_out={out_dir}", f"--grpc_python_out={out_dir}",
            *(f"{PACKAGE}/{p}" for p in PROTOS)]
    if protoc.main(args) != 0:
        raise SystemExit(f"attn_client: protoc failed on {', '.join(PROTOS)} from {root}")
    # Packages for the generated modules, so they import as attn_client._proto.<path>.
    for p in PROTOS:
        d = out_dir / PACKAGE / pathlib.Path(p).parent
        while d != out_dir / "attn_client":
            (d / "__init__.py").touch()
            d = d.parent


class BuildPyWithStubs(build_py):
    def run(self):
        super().run()
        generate_stubs(pathlib.Path(self.build_lib))
        shutil.copyfile(report_spec(), pathlib.Path(self.build_lib) / "attn_client" / REPORT_SPEC)


class SdistWithProtos(sdist):
    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        root = proto_root()
        for p in PROTOS:
            dest = pathlib.Path(base_dir) / "proto" / p
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(root / p, dest)
        shutil.copyfile(report_spec(), pathlib.Path(base_dir) / REPORT_SPEC)


setup(cmdclass={"build_py": BuildPyWithStubs, "sdist": SdistWithProtos})
