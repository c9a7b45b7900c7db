"""A GGUF file's metadata and tensor table, read with ``struct`` over one memory map: the one GGUF parser
(:func:`read_header` reads the head of a file to list it; :class:`Reader` the whole table to load it).

The interface is the part of ``gguf.GGUFReader`` this package uses (``fields[key].contents()``; ``tensors`` with
``name``, ``tensor_type``, ``shape`` (dims fastest first), ``n_bytes``, ``data_offset``, ``data`` as
``gguf.quants.dequantize`` takes it). ``GGUFReader`` makes numpy views for every element of every array, slow for
a vocabulary of 150,000 tokens and as many merges (docs/measurements.md); here a string array is one loop of
``struct.unpack_from``. A damaged file is a ``ValueError``; a tensor's ``data`` is only mapped when asked for, so a
cut-short file can first be told apart by its sizes.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# GGUF value types -> struct formats (8: string, 9: array)
SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
NUMPY = {0: np.uint8, 1: np.int8, 2: np.uint16, 3: np.int16, 4: np.uint32, 5: np.int32, 6: np.float32, 7: np.bool_,
         10: np.uint64, 11: np.int64, 12: np.float64}
PLAIN = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I8": np.int8, "I16": np.int16, "I32": np.int32,
         "I64": np.int64}  # types stored as plain numbers: ``data`` has the tensor's shape; others are bytes per row
ALIGNMENT = 32  # general.alignment's default


class DamagedFile(ValueError):  # noqa: N818 (a file, not an error of ours, is damaged)
    """What is wrong inside a file: a detail, quoted in the loader's own message to a person (``open_gguf``)."""


@dataclass(frozen=True)
class Field:
    """One metadata value: a number, a string, a bool, or a list of them."""

    value: object

    def contents(self) -> object:
        return self.value


@dataclass
class Tensor:
    """One tensor's entry in the file's table; ``data`` maps its bytes on first use."""

    name: str
    tensor_type: object  # gguf.GGMLQuantizationType
    shape: np.ndarray  # dims as the file lists them: fastest first
    n_elements: int
    n_bytes: int
    data_offset: int
    _map: mmap.mmap | bytearray

    @property
    def data(self) -> np.ndarray:
        from gguf.quants import quant_shape_to_byte_shape

        dims = tuple(int(d) for d in reversed(self.shape))  # (rows, ..., columns)
        plain = PLAIN.get(self.tensor_type.name)
        if plain is not None:
            return np.frombuffer(self._map, plain, self.n_elements, self.data_offset).reshape(dims)
        raw = np.frombuffer(self._map, np.uint8, self.n_bytes, self.data_offset)
        return raw.reshape(quant_shape_to_byte_shape(dims, self.tensor_type))  # (rows, bytes of a row)


class Reader:
    """``fields`` (key -> :class:`Field`) and ``tensors`` (:class:`Tensor`) of a GGUF file (version 2 or 3)."""

    def __init__(self, path: str | Path, data: bytearray | None = None):
        if data is not None:  # a file read into memory (its chunks joined: gguf_packages.read_whole)
            self._map = data
        else:
            with open(path, "rb") as f:
                self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        self.fields: dict[str, Field] = {}
        self.tensors: list[Tensor] = []
        try:
            self._read()
        except (struct.error, UnicodeDecodeError, KeyError, OverflowError) as e:
            raise DamagedFile(f"cannot read the GGUF header: {e!r}") from None

    def release(self, tensor: Tensor) -> None:
        """Let the pages of ``tensor``'s bytes go from this process's memory once it is de-quantized (they stay in
        the page cache; read again if asked): a cold load then holds the float32 weights, not the file too."""
        if isinstance(self._map, mmap.mmap) and hasattr(mmap, "MADV_DONTNEED"):
            start = tensor.data_offset - tensor.data_offset % mmap.PAGESIZE
            self._map.madvise(mmap.MADV_DONTNEED, start, tensor.data_offset + tensor.n_bytes - start)

    def _read(self) -> None:
        import gguf

        parser = Parser(self._map)
        self.fields = {key: Field(value) for key, value in parser.fields()}
        table = []
        for _unused in range(parser.n_tensors):
            name = parser.text()
            (n_dims,) = parser.take("<I")
            dims = parser.take(f"<{n_dims}Q")
            kind, offset = parser.take("<IQ")
            table.append((name, dims, gguf.GGMLQuantizationType(kind), offset))
        align = int(self.fields.get("general.alignment", Field(ALIGNMENT)).value)
        start = parser.pos + (-parser.pos) % align
        seen = set()
        for name, dims, kind, offset in table:
            if name in seen:
                raise DamagedFile(f"the tensor {name} is listed twice")
            seen.add(name)
            n = int(np.prod(dims, dtype=np.int64))
            block, size = gguf.GGML_QUANT_SIZES[kind]
            self.tensors.append(Tensor(name, kind, np.array(dims, dtype=np.uint64), n, n * size // block,
                                       start + offset, self._map))


class Parser:
    """GGUF's header over a buffer: the magic and counts, then ``fields()`` one metadata key and value at a time,
    then the tensor table from ``pos`` (the one parser both :class:`Reader` and :func:`read_header` use)."""

    def __init__(self, m: mmap.mmap | bytearray):
        self.m, self.pos = m, 0
        magic, version, self.n_tensors, self.n_kv = self.take("<4sIQQ")
        if magic != b"GGUF" or version not in (2, 3):
            raise DamagedFile(f"not a GGUF file of version 2 or 3 (magic {magic!r}, version {version})")

    def take(self, fmt: str) -> tuple:
        value = struct.unpack_from(fmt, self.m, self.pos)
        self.pos += struct.calcsize(fmt)
        return value

    def text(self) -> str:
        (n,) = struct.unpack_from("<Q", self.m, self.pos)
        if self.pos + 8 + n > len(self.m):
            raise DamagedFile(f"a string of {n:,} bytes runs past the end of the file")
        self.pos += 8 + n
        return self.m[self.pos - n:self.pos].decode("utf-8")

    def value(self, kind: int) -> object:
        if kind == 8:
            return self.text()
        if kind == 9:
            item, count = self.take("<IQ")
            if item == 8:
                return [self.text() for _unused in range(count)]
            if item in NUMPY:
                array = np.frombuffer(self.m, NUMPY[item], count, self.pos)
                self.pos += array.nbytes
                return array.tolist()
            return [self.value(item) for _unused in range(count)]  # arrays of arrays
        return self.take(SCALARS[kind])[0]

    def fields(self, stop: str | None = None):
        """Each ``(key, value)`` of the metadata, in the file's order; ``stop``: end before the first key that
        starts so (the tokenizer's long arrays, when only the model's facts are wanted)."""
        for _unused in range(self.n_kv):
            key = self.text()
            if stop is not None and key.startswith(stop):
                return
            (kind,) = self.take("<I")
            yield key, self.value(kind)


def read_header(path: str | Path) -> dict[str, object]:
    """The metadata at the head of a GGUF file (``general.*`` and the architecture's keys) up to the first
    ``tokenizer.*`` key, no tensor mapped: cheap enough to list a folder. An unreadable file gives ``{}``; a
    damaged one what could be read before the damage."""
    meta: dict[str, object] = {}
    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            for key, value in Parser(m).fields(stop="tokenizer."):
                meta[key] = value
    except (OSError, ValueError, KeyError, struct.error, UnicodeDecodeError, OverflowError, MemoryError):
        return meta
    return meta
