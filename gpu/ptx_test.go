package gpu

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPTXHasEveryKernel checks the committed PTX: both targets, and an
// .entry for every kernel the Go side looks up (a kernel added to the Go
// side without `go generate` fails here rather than on the GPU).
func TestPTXHasEveryKernel(t *testing.T) {
	for _, c := range []struct {
		name, target string
		src          []byte
	}{{"sm80", "sm_80", ptxSM80}, {"sm90", "sm_90", ptxSM90}} {
		t.Run(c.name, func(t *testing.T) {
			info := parsePTX(c.src)
			require.Equal(t, c.target, info.Target)
			require.NotEmpty(t, info.Version)
			require.ElementsMatch(t, kernelNames, info.Entries, "PTX entries and kernelNames differ")
		})
	}
	require.Equal(t, ptxSM90, ptxFor(9))
	require.Equal(t, ptxSM90, ptxFor(10))
	require.Equal(t, ptxSM80, ptxFor(8))
}

// TestKernelSourceMatchesPTX checks that every extern "C" kernel of the CUDA
// source is in the PTX and in kernelNames.
func TestKernelSourceMatchesPTX(t *testing.T) {
	src, err := os.ReadFile("kernels/kernels.cu")
	require.NoError(t, err)
	re := regexp.MustCompile(`extern "C" __global__ void (\w+)\(`)
	var names []string
	for _, m := range re.FindAllSubmatch(src, -1) {
		names = append(names, string(m[1]))
	}
	require.ElementsMatch(t, kernelNames, names)
}

func TestParsePTX(t *testing.T) {
	src := []byte("//\n.version 7.8\n.target sm_80\n.address_size 64\n\n\t// .globl\tfoo\n.visible .entry foo(\n\t.param .u64 foo_param_0\n)\n{\n}\n.entry bar()\n{\n}\n")
	info := parsePTX(src)
	require.Equal(t, ptxInfo{Version: "7.8", Target: "sm_80", Entries: []string{"foo", "bar"}}, info)
}

// loadBatches scans the PTX of one kernel entry in program order and
// returns, for every group of 16-byte global loads (ld.global.v4.f32,
// .nc or not) issued before the next bf16 conversion (cvt.rn.bf16.f32,
// cvt.rn.bf16x2.f32) or shared-memory store, the number of loads in it:
// how many tile loads a thread has in flight before it needs the first
// of them. Loads followed by neither (none in these kernels) are not
// reported.
func loadBatches(ptx []byte, entry string) ([]int, error) {
	text := string(ptx)
	i := strings.Index(text, ".entry "+entry+"(")
	if i < 0 {
		return nil, fmt.Errorf("no entry %s", entry)
	}
	text = text[i:]
	if j := strings.Index(text, "\n}\n"); j >= 0 {
		text = text[:j]
	}
	var batches []int
	run := 0
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(strings.Trim(strings.TrimSpace(line), "{}"))
		if len(f) == 0 {
			continue
		}
		op := f[0]
		if strings.HasPrefix(op, "@") && len(f) > 1 { // a predicated instruction
			op = f[1]
		}
		switch {
		case op == "ld.global.v4.f32" || op == "ld.global.nc.v4.f32":
			run++
		case strings.HasPrefix(op, "cvt.rn.bf16") || strings.HasPrefix(op, "st.shared"):
			if run > 0 {
				batches = append(batches, run)
			}
			run = 0
		}
	}
	return batches, nil
}

// TestAttentionLoadsInFlight reads the committed PTX of the tensor-core
// attention kernels and counts, per batch, the 16-byte loads of K, V, Q
// and dO tiles a thread issues before the first of them is converted to
// bf16 or stored (issue #37: a runtime stride kept the loop rolled, one
// load and one global round trip per group of 4 channels). Each kernel
// must keep at least 8 in flight (TC_LOADS in kernels.cu) in every batch,
// but the dK/dV kernel at head dim 128, whose per-step Q and dO batches
// are 4 (its 128 float32 accumulators leave no room for 8 float4 without
// spilling; ptxas -v: 238 registers, no spills) — its K and V prologue
// still loads 8 at a time.
func TestAttentionLoadsInFlight(t *testing.T) {
	for _, c := range []struct {
		entry         string
		least, oneMax int // every batch ≥ least; the largest ≥ oneMax
	}{
		{"attn_fwd_tc64", 8, 8}, {"attn_fwd_tc128", 8, 8},
		{"attn_bwd_dq_tc64", 8, 8}, {"attn_bwd_dq_tc128", 8, 8},
		{"attn_bwd_dkdv_tc64", 8, 8}, {"attn_bwd_dkdv_tc128", 4, 8},
	} {
		for _, p := range []struct {
			name string
			src  []byte
		}{{"sm80", ptxSM80}, {"sm90", ptxSM90}} {
			b, err := loadBatches(p.src, c.entry)
			require.NoError(t, err)
			require.NotEmpty(t, b, "%s %s: no 16-byte tile loads", p.name, c.entry)
			t.Logf("%s %-20s batches of 16-byte loads before a conversion: %v", p.name, c.entry, b)
			require.GreaterOrEqual(t, slices.Min(b), c.least, "%s %s", p.name, c.entry)
			require.GreaterOrEqual(t, slices.Max(b), c.oneMax, "%s %s", p.name, c.entry)
		}
	}
}

// TestLoadBatches checks the scanner on hand-written PTX: two loads then
// a conversion, a predicated load then a shared store, a lone conversion.
func TestLoadBatches(t *testing.T) {
	src := []byte(".visible .entry k(\n)\n{\n\tld.global.v4.f32 \t{%f1, %f2, %f3, %f4}, [%rd1];\n\tadd.s32 %r1, %r1, 1;\n" +
		"\tld.global.nc.v4.f32 \t{%f5, %f6, %f7, %f8}, [%rd2];\n\t{  cvt.rn.bf16.f32 %rs1, %f1;}\n" +
		"\t@%p1 ld.global.v4.f32 \t{%f1, %f2, %f3, %f4}, [%rd3];\n\tst.shared.v2.u32 [%r2], {%r3, %r4};\n" +
		"\tcvt.rn.bf16x2.f32 %r5, %f1, %f2;\n\tld.global.v4.f32 \t{%f1, %f2, %f3, %f4}, [%rd4];\n}\n")
	b, err := loadBatches(src, "k")
	require.NoError(t, err)
	require.Equal(t, []int{2, 1}, b)
	_, err = loadBatches(src, "missing")
	require.Error(t, err)
}
