# Golden values for bf16FromFloat32: float32 bit patterns and the bfloat16
# bits torch 1.13 produces for tensor.to(torch.bfloat16).
# Run with Debian's python3-torch: /usr/bin/python3 gen_bf16.py > bf16_golden.json
import json, struct, torch

def f32(bits):
    return struct.unpack("<f", struct.pack("<I", bits))[0]

bits = [
    0x00000000, 0x80000000, 0x3f800000, 0xbf800000,  # ±0, ±1
    0x3f808000,  # 1 + 2^-8: tie, even below -> 0x3f80
    0x3f818000,  # tie, odd below -> rounds up to 0x3f82
    0x3f80c000, 0x3f807fff, 0x3f808001,
    0x7f7fffff,  # max float32 -> rounds to +Inf
    0x7f7f0000, 0x00000001, 0x00400000, 0x807fffff,  # subnormals
    0x7f800000, 0xff800000,  # ±Inf
    0x40490fdb,  # pi
    0x3dcccccd,  # 0.1
    0xc2f6e979,  # -123.456
]
g = torch.Generator().manual_seed(7)
bits += [int(b) & 0xffffffff for b in torch.randint(0, 2**31 - 1, (40,), generator=g).tolist()]
bits += [(int(b) | 0x80000000) & 0xffffffff for b in torch.randint(0, 2**31 - 1, (20,), generator=g).tolist()]
vals = torch.tensor([f32(b) for b in bits], dtype=torch.float32)
# Drop NaN patterns from the random set; NaN is tested by hand.
keep = [i for i in range(len(bits)) if vals[i] == vals[i]]
bf = vals.to(torch.bfloat16).view(torch.int16).tolist()
out = [{"f32": bits[i], "bf16": bf[i] & 0xffff} for i in keep]
print(json.dumps(out, indent=0))
