"""Regenerates the gRPC stubs in beacon_client/_pb from the repository's proto/ files.

    python generate.py            # write them
    python generate.py --check    # exit 1 if the committed stubs differ from proto/

Needs grpcio-tools. The stubs are committed, so installing the package needs only grpcio
and protobuf. protoc writes flat imports (`import beacon_pb2`); they are made relative here
so the stubs live inside the package.
"""

import pathlib
import re
import sys
import tempfile

from grpc_tools import protoc

HERE = pathlib.Path(__file__).resolve().parent
PROTO = HERE.parent.parent / "proto"
OUT = HERE / "beacon_client" / "_pb"


def generate(out: pathlib.Path) -> None:
    files = sorted(str(p) for p in PROTO.glob("*.proto"))
    code = protoc.main(
        ["protoc", f"-I{PROTO}", f"--python_out={out}", f"--pyi_out={out}", f"--grpc_python_out={out}", *files]
    )
    if code != 0:
        sys.exit(f"protoc failed ({code})")
    for path in out.glob("*.py*"):
        text = path.read_text()
        text = re.sub(r"^import (\w+_pb2)", r"from . import \1", text, flags=re.M)
        path.write_text(text)
    (out / "__init__.py").write_text('"""Generated from proto/ by generate.py: do not edit."""\n')


def main() -> None:
    if "--check" in sys.argv:
        with tempfile.TemporaryDirectory() as tmp:
            fresh = pathlib.Path(tmp)
            generate(fresh)
            stale = [
                p.name
                for p in sorted(fresh.iterdir())
                if not (OUT / p.name).exists() or (OUT / p.name).read_text() != p.read_text()
            ]
            if stale:
                sys.exit(f"stubs differ from proto/: {', '.join(stale)}; run python generate.py")
        print("stubs match proto/")
        return
    generate(OUT)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
