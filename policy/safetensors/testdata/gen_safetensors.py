#!/usr/bin/env python3
"""Golden files for package safetensors, written with plain struct/json and torch.

No `safetensors` package is used: this script writes and reads the format
independently of the Go code (8-byte little-endian header length, JSON
header, data), with torch (Debian python3-torch 1.13) doing the dtype
conversions.

Run from the package directory:

    python3 testdata/gen_safetensors.py           # writes testdata/golden.safetensors
    python3 testdata/gen_safetensors.py verify    # reads testdata/written_by_go.safetensors
                                                  # (made by `go test -run TestWrittenByGo -update`)
                                                  # and writes testdata/written_by_go.python.json
"""
import json
import math
import os
import struct
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))

DTYPES = {
    torch.float32: ("F32", 4),
    torch.float16: ("F16", 2),
    torch.bfloat16: ("BF16", 2),
    torch.int64: ("I64", 8),
    torch.int32: ("I32", 4),
}
SIZES = {"F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "F64": 8, "U8": 1,
         "I8": 1, "BOOL": 1, "I16": 2, "U16": 2, "U32": 4, "U64": 8}


def tensor_bytes(t):
    t = t.contiguous()
    if t.dtype in (torch.float16, torch.bfloat16):
        return t.view(torch.int16).numpy().astype("<i2").tobytes()
    if t.dtype == torch.float32:
        return t.numpy().astype("<f4").tobytes()
    if t.dtype == torch.int64:
        return t.numpy().astype("<i8").tobytes()
    if t.dtype == torch.int32:
        return t.numpy().astype("<i4").tobytes()
    raise ValueError(t.dtype)


def write(path, tensors, metadata):
    header = {"__metadata__": metadata}
    blobs = []
    off = 0
    for name in sorted(tensors):
        t = tensors[name]
        b = tensor_bytes(t)
        header[name] = {"dtype": DTYPES[t.dtype][0], "shape": list(t.shape),
                        "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def read(path):
    """Independent reader: returns (metadata, {name: (dtype, shape, float32 tensor or int list)})."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n].decode("utf-8"))
    body = data[8 + n:]
    meta = header.pop("__metadata__", None)
    spans = sorted((v["data_offsets"][0], v["data_offsets"][1], k) for k, v in header.items())
    end = 0
    for b, e, k in spans:
        assert b == end, ("gap or overlap at", k)
        end = e
    assert end == len(body), "data not fully covered"
    out = {}
    for k, v in header.items():
        b, e = v["data_offsets"]
        raw = body[b:e]
        numel = math.prod(v["shape"])
        assert e - b == numel * SIZES[v["dtype"]], k
        if v["dtype"] == "F32":
            vals = torch.tensor(list(struct.unpack("<%df" % numel, raw)), dtype=torch.float32)
        elif v["dtype"] in ("F16", "BF16"):
            bits = torch.tensor(list(struct.unpack("<%dh" % numel, raw)), dtype=torch.int16)
            vals = bits.view(torch.float16 if v["dtype"] == "F16" else torch.bfloat16).float()
        elif v["dtype"] == "I64":
            vals = list(struct.unpack("<%dq" % numel, raw))
        else:
            vals = raw.hex()
        out[k] = (v["dtype"], v["shape"], vals)
    return meta, out


def f32_bits(t):
    return [x & 0xFFFFFFFF for x in t.view(torch.int32).tolist()]


def golden():
    torch.manual_seed(20251122)
    tensors = {}
    # Hand-checked values; the Go test states each expected float32.
    tensors["f32"] = torch.tensor([[0.0, -0.0, 1.5], [-2.25, 3.4028234663852886e38, 1e-45]], dtype=torch.float32)
    tensors["f32_special"] = torch.tensor([math.inf, -math.inf, math.nan], dtype=torch.float32)
    f16_bits = [0x0001, 0x03FF, 0x0400, 0x7BFF, 0x3C00, 0xC000, 0x7C00, 0xFC00, 0x7E00, 0x8000, 0x3555]
    tensors["f16"] = torch.tensor([b - 65536 if b >= 32768 else b for b in f16_bits], dtype=torch.int16).view(torch.float16)
    bf16_bits = [0x3F80, 0xBF00, 0x0001, 0x007F, 0x0080, 0x7F7F, 0x7F80, 0xFF80, 0x7FC0, 0x8000, 0x4049]
    tensors["bf16"] = torch.tensor([b - 65536 if b >= 32768 else b for b in bf16_bits], dtype=torch.int16).view(torch.bfloat16)
    # Rounding goldens: torch's float32 -> bf16 / f16 conversions of
    # values spanning normal, subnormal, overflow and exact-tie cases.
    parts = [torch.randn(64) * (2.0 ** k) for k in range(-140, 130, 6)]
    ties = []
    for base in (1.0, 1.5, -3.0, 2.0 ** -130, 2.0 ** -20):
        for k in range(1, 5):
            ties += [base * (1 + k * 2.0 ** -8), base * (1 + (2 * k + 1) * 2.0 ** -9),
                     base * (1 + k * 2.0 ** -10), base * (1 + (2 * k + 1) * 2.0 ** -11)]
    ties += [65504.0, 65519.0, 65520.0, 2.0 ** -25, 2.0 ** -25 * 1.0000001, 3 * 2.0 ** -26,
             2.0 ** -24 * 1.5, 2.0 ** -24 * 2.5, 3.3961e38, 3.4e38, -0.0, 0.0]
    src = torch.cat(parts + [torch.tensor(ties)]).float()
    src = src[torch.isfinite(src)]
    tensors["round_source"] = src
    tensors["round_bf16"] = src.to(torch.bfloat16)
    tensors["round_f16"] = src.to(torch.float16)
    tensors["i64"] = torch.tensor([-1, 0, 1 << 40], dtype=torch.int64)
    tensors["scalar"] = torch.tensor(7.0, dtype=torch.float32)
    tensors["empty"] = torch.zeros(0, 4, dtype=torch.float32)
    write(os.path.join(HERE, "golden.safetensors"), tensors, {"format": "pt", "source": "gen_safetensors.py"})
    # Check our own reader on our own file.
    meta, got = read(os.path.join(HERE, "golden.safetensors"))
    assert meta["format"] == "pt"
    assert torch.equal(got["round_bf16"][2].view(torch.int32), tensors["round_bf16"].float().view(torch.int32))


def verify():
    meta, got = read(os.path.join(HERE, "written_by_go.safetensors"))
    out = {"metadata": meta, "tensors": {}}
    for k, (dtype, shape, vals) in sorted(got.items()):
        if isinstance(vals, torch.Tensor):
            vals = f32_bits(vals.reshape(-1))
        out["tensors"][k] = {"dtype": dtype, "shape": shape, "float32_bits_or_values": vals}
    with open(os.path.join(HERE, "written_by_go.python.json"), "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "verify":
        verify()
    else:
        golden()
