"""A minimal GGUF v3 writer (shared/spec/gguf.md): metadata records and F32
tensors only, since bmoe-mkmodel --quantize makes the quantized files from
the F32 one with bmoe's own quantizers."""
import array
import os
import struct
import sys

ALIGNMENT = 32

UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY = 4, 5, 6, 7, 8, 9
TYPE_F32 = 0


def _string(text):
    data = text.encode("utf-8")
    return struct.pack("<Q", len(data)) + data


def _scalar(value_type, value):
    if value_type == UINT32:
        return struct.pack("<I", value)
    if value_type == INT32:
        return struct.pack("<i", value)
    if value_type == FLOAT32:
        return struct.pack("<f", value)
    if value_type == BOOL:
        return struct.pack("<B", 1 if value else 0)
    if value_type == STRING:
        return _string(value)
    raise ValueError("unsupported value type %d" % value_type)


def _record(key, value_type, value, element_type=None):
    out = _string(key) + struct.pack("<I", value_type)
    if value_type == ARRAY:
        out += struct.pack("<IQ", element_type, len(value))
        out += b"".join(_scalar(element_type, v) for v in value)
    else:
        out += _scalar(value_type, value)
    return out


def _pad(n):
    return (ALIGNMENT - n % ALIGNMENT) % ALIGNMENT


def write(path, kvs, tensors):
    """kvs: (key, type, value[, element type]) tuples in file order;
    tensors: (name, torch tensor) pairs, written as F32 with the torch shape
    reversed into ggml order."""
    assert sys.byteorder == "little", "GGUF is little-endian; array.tobytes is native"
    header = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs))
    meta = b"".join(_record(*kv) for kv in kvs)
    infos = b""
    blobs = []
    offset = 0
    for name, tensor in tensors:
        values = tensor.detach().to("cpu").float().contiguous().reshape(-1).tolist()
        blob = array.array("f", values).tobytes()
        dims = list(reversed(tensor.shape))
        infos += _string(name) + struct.pack("<I", len(dims))
        infos += b"".join(struct.pack("<Q", d) for d in dims)
        infos += struct.pack("<IQ", TYPE_F32, offset)
        blobs.append(blob)
        offset += len(blob) + _pad(len(blob))
    with open(path + ".tmp", "wb") as f:
        head = header + meta + infos
        f.write(head + b"\0" * _pad(len(head)))
        for blob in blobs:
            f.write(blob + b"\0" * _pad(len(blob)))
    os.replace(path + ".tmp", path)
