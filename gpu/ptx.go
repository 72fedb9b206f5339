package gpu

import (
	"bufio"
	"bytes"
	_ "embed"
	"strings"
)

// The kernels compiled to PTX for two virtual architectures. Compute
// capability 9.0 and above load the compute_90 PTX; 8.x loads compute_80.
var (
	//go:embed kernels/kernels_sm80.ptx
	ptxSM80 []byte
	//go:embed kernels/kernels_sm90.ptx
	ptxSM90 []byte
	//go:embed kernels/decode_sm80.ptx
	decodePTXSM80 []byte
	//go:embed kernels/decode_sm90.ptx
	decodePTXSM90 []byte
)

// kernelNames lists every kernel the backend looks up in the module.
var kernelNames = []string{
	"fill_f32", "scale_f32", "rand_normal", "f32_to_bf16", "round_bf16", "bf16_to_f32", "add_f32", "axpy_f32",
	"bias_add", "bias_grad", "embedding_fwd", "embedding_fwd_bf16", "embedding_bwd",
	"rmsnorm_fwd", "rmsnorm_bwd_dx", "rmsnorm_dw_partial", "rmsnorm_dw_finish", "rope",
	"swiglu_fwd", "swiglu_bwd",
	"attn_fwd", "attn_decode_partial", "attn_decode_combine", "attn_bwd_dot", "attn_bwd_dq", "attn_bwd_dkdv",
	"attn_fwd_tc64", "attn_fwd_tc128", "attn_bwd_dq_tc64", "attn_bwd_dq_tc128", "attn_bwd_dkdv_tc64", "attn_bwd_dkdv_tc128",
	"lm_init", "lm_stats", "lm_finish", "lm_dz", "lm_dz_bf16",
	"sgemm_tiled", "opt_pass", "grad_sumsq_partial", "grad_sumsq_finish",
}

// ptxFor returns the PTX for a device of compute capability major.minor.
func ptxFor(major int) []byte {
	if major >= 9 {
		return ptxSM90
	}
	return ptxSM80
}

// decodePTXFor returns the decode module's PTX (kernels/decode.cu) for a
// device of compute capability major.minor.
func decodePTXFor(major int) []byte {
	if major >= 9 {
		return decodePTXSM90
	}
	return decodePTXSM80
}

// ptxInfo is what the loader needs to know about a PTX module: its .target
// and the names of its kernels (.entry directives).
type ptxInfo struct {
	Version string
	Target  string
	Entries []string
}

// parsePTX reads the header directives and the entry names of a PTX file.
// nvcc writes ".visible .entry name(" with the parameters on later lines.
func parsePTX(src []byte) ptxInfo {
	var info ptxInfo
	sc := bufio.NewScanner(bytes.NewReader(src))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, ".version "):
			info.Version = strings.TrimSpace(strings.TrimPrefix(line, ".version "))
		case strings.HasPrefix(line, ".target "):
			info.Target = strings.TrimSpace(strings.TrimPrefix(line, ".target "))
		case strings.HasPrefix(line, ".visible .entry ") || strings.HasPrefix(line, ".entry "):
			name := line[strings.Index(line, ".entry ")+len(".entry "):]
			if i := strings.IndexAny(name, "( "); i >= 0 {
				name = name[:i]
			}
			info.Entries = append(info.Entries, name)
		}
	}
	return info
}
