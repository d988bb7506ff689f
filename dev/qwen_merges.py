"""Derive fhs/llm/vocab/qwen2-merges.txt.xz from the CPU book's Qwen GGUF (its tokenizer's merges).

The merges are read straight from the GGUF's metadata (``tokenizer.ggml.merges``), with no
llama.cpp: a GGUF file opens with its key-value metadata, strings and arrays length-prefixed.

    python -m dev.qwen_merges            # write the file
    python -m dev.qwen_merges --check    # exit 1 if the shipped file is not what the GGUF gives
"""

from __future__ import annotations

import argparse
import lzma
import struct
import sys
from pathlib import Path
from typing import Any, BinaryIO

from fhs.llm.qwen_bpe import MERGES

_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


def _string(f: BinaryIO) -> str:
    (n,) = struct.unpack("<Q", f.read(8))
    return f.read(n).decode("utf-8")


def _value(f: BinaryIO, kind: int) -> Any:
    if kind == 8:
        return _string(f)
    if kind == 9:
        item, n = struct.unpack("<IQ", f.read(12))
        return [_value(f, item) for _ in range(n)]
    fmt = "<" + _SCALARS[kind]
    return struct.unpack(fmt, f.read(struct.calcsize(fmt)))[0]


def gguf_metadata(path: Path, key: str) -> Any:
    """One metadata value of a GGUF file (version 2 or 3)."""
    with open(path, "rb") as f:
        if f.read(4) != b"GGUF":
            raise ValueError(f"{path} is not a GGUF file")
        f.read(4)  # version
        _tensors, count = struct.unpack("<QQ", f.read(16))
        for _ in range(count):
            name = _string(f)
            (kind,) = struct.unpack("<I", f.read(4))
            value = _value(f, kind)
            if name == key:
                return value
    raise KeyError(f"{path} has no {key}")


def merges_bytes(gguf: Path) -> bytes:
    merges = gguf_metadata(gguf, "tokenizer.ggml.merges")
    return ("\n".join(merges) + "\n").encode("utf-8")


def main(argv: list[str] | None = None) -> int:
    from fhs.llm.models import model_path

    parser = argparse.ArgumentParser(prog="python -m dev.qwen_merges", description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if the shipped file differs")
    args = parser.parse_args(argv)
    data = merges_bytes(Path(model_path("qwen2.5-0.5b")))
    if args.check:
        same = lzma.decompress(MERGES.read_bytes()) == data
        print(f"{MERGES}: {'the GGUF merges' if same else 'differs from the GGUF merges'}")
        return 0 if same else 1
    MERGES.write_bytes(lzma.compress(data, preset=9 | lzma.PRESET_EXTREME))
    return 0


if __name__ == "__main__":
    sys.exit(main())
