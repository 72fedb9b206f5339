package gpu

import (
	"os"
	"regexp"
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
