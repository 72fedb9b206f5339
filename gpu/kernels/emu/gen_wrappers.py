#!/usr/bin/env python3
"""gen_wrappers.py reads the extern "C" kernels of ../kernels.cu and prints,
for fakecuda.cc, one wrapper per kernel that unpacks cuLaunchKernel's
parameter pointers into the kernel's typed arguments, and the name table, marking the kernels without barriers or warp shuffles,
whose threads the emulator may run one after another, with each kernel's argument sizes (a captured launch keeps a copy).
Run by fakecuda.sh; its output is not committed."""
import re, sys

src = open(sys.argv[1]).read()
out = []
names = []
# A call of a device template (the tensor-core kernels' bodies) counts as
# synchronizing: its barriers are out of sight of this scan.
sync = re.compile(r"__syncthreads|__syncwarp|__shfl|warp_sum|warp_max|block_sum|block_max|\w+<[^>()]*>\(")
matches = list(re.finditer(r'extern "C" __global__ void (\w+)\(([^)]*)\)', src))
for n, m in enumerate(matches):
    name, params = m.group(1), m.group(2)
    body = src[m.end():matches[n + 1].start() if n + 1 < len(matches) else len(src)]
    # Kernels without barriers or shuffles may run their threads one by one.
    seq = 0 if sync.search(body) else 1
    args, sizes = [], []
    for i, p in enumerate(x.strip() for x in params.split(",")):
        typ = p.rsplit(" ", 1)[0].strip()
        if "*" in p and "*" not in typ:  # "float* x" splits as "float*" "x"; "float *x" not used
            typ += "*"
        args.append(f"*({typ}*)p[{i}]")
        sizes.append(f"sizeof({typ})")
    out.append(f"static void w_{name}(void** p) {{ {name}({', '.join(args)}); }}")
    # The argument sizes, for the fake graph capture's copy of a launch.
    out.append(f"static const size_t z_{name}[] = {{{', '.join(sizes)}}};")
    names.append((name, seq, len(sizes)))
out.append("static const struct { const char* name; void (*fn)(void**); int seq; int nargs; const size_t* sizes; } emu_kernels[] = {")
out += [f'  {{"{n}", w_{n}, {q}, {a}, z_{n}}},' for n, q, a in names]
out.append("};")
print("\n".join(out))
