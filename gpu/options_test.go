package gpu

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLibrarySearchOrder(t *testing.T) {
	require.Equal(t, []string{"libcuda.so.1", "libcuda.so"}, driverLibraries())
	// Newest cuBLAS first, the unversioned development link, then a
	// toolkit's lib64 folder the loader was not told of.
	require.Equal(t, []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so.11", "libcublas.so",
		"/usr/local/cuda/lib64/libcublas.so.13", "/usr/local/cuda/lib64/libcublas.so.12", "/usr/local/cuda/lib64/libcublas.so.11"}, cublasLibraries())
	c := defaultConfig()
	require.Equal(t, cublasLibraries(), c.cublas)
	WithCuBLAS()(&c)
	require.Empty(t, c.cublas, "WithCuBLAS() disables cuBLAS")
	WithCuBLAS("/opt/x/libcublas.so.12")(&c)
	require.Equal(t, []string{"/opt/x/libcublas.so.12"}, c.cublas)
}

// TestNoCuBLASIsRefused: without cuBLAS New refuses (ErrNoCuBLAS, with
// where the libraries are and how to go on) unless the tiled GEMM was
// allowed, by option or by the environment; WithCuBLAS() asks for no
// cuBLAS and needs no allowance.
func TestNoCuBLASIsRefused(t *testing.T) {
	t.Setenv(AllowNoCuBLASEnv, "")
	c := defaultConfig()
	require.False(t, c.noBLASOK, "cuBLAS is required by default")
	WithCuBLASFallback(true)(&c)
	require.True(t, c.noBLASOK)
	t.Setenv(AllowNoCuBLASEnv, "1")
	require.True(t, defaultConfig().noBLASOK, "%s=1 allows the tiled GEMM", AllowNoCuBLASEnv)
	c = defaultConfig()
	WithCuBLASFallback(false)(&c)
	require.False(t, c.noBLASOK, "the option overrides the environment")
	err := noCuBLASError([]string{"libcublas.so.13"})
	require.ErrorIs(t, err, ErrNoCuBLAS)
	for _, want := range []string{"libcublas.so.13", "nvidia/cublas/lib", "nvidia/cu13/lib", "LD_LIBRARY_PATH", AllowNoCuBLASEnv} {
		require.Contains(t, err.Error(), want)
	}
}

func TestConfig(t *testing.T) {
	c := defaultConfig()
	require.Equal(t, BF16, c.precision, "bf16 tensor cores by default")
	require.NoError(t, c.validate())
	for name, o := range map[string]Option{
		"negative device": WithDevice(-1),
		"bad precision":   WithPrecision(Precision(7)),
		"negative cache":  WithCacheLimit(-1),
	} {
		c := defaultConfig()
		o(&c)
		require.Error(t, c.validate(), name)
	}
	c = defaultConfig()
	WithDevice(-1)(&c)
	require.ErrorIs(t, c.validate(), ErrNoDevice)
	require.Equal(t, "bf16", BF16.String())
	require.Equal(t, "tf32", TF32.String())
	require.Equal(t, "fp32", FP32.String())
	require.Equal(t, "Precision(9)", Precision(9).String())
}

func TestAttentionChoice(t *testing.T) {
	c := defaultConfig()
	require.Equal(t, AttentionAuto, c.attention)
	require.True(t, c.weightCache, "weight cache on by default")
	// Auto: tensor cores in BF16 for head dims up to 128.
	for hd, want := range map[int]bool{8: true, 64: true, 128: true, 129: false, 256: false} {
		require.Equal(t, want, c.tensorCoreAttention(hd), "bf16 auto, hd %d", hd)
	}
	for _, p := range []Precision{TF32, FP32} {
		c := defaultConfig()
		WithPrecision(p)(&c)
		require.False(t, c.tensorCoreAttention(128), "%v keeps float32 attention", p)
		require.Equal(t, "attention fp32", c.attentionName())
		WithAttention(AttentionTensorCores)(&c)
		require.True(t, c.tensorCoreAttention(128), "%v with tensor cores forced", p)
		require.False(t, c.tensorCoreAttention(256), "no tensor-core kernel above 128")
	}
	WithAttention(AttentionFP32)(&c)
	require.False(t, c.tensorCoreAttention(64))
	WithAttention(AttentionKernels(5))(&c)
	require.Error(t, c.validate())
	c = defaultConfig()
	require.Contains(t, c.attentionName(), "tensor cores")
	WithWeightCache(false)(&c)
	require.False(t, c.weightCache)
	require.Equal(t, "tensor-cores", AttentionTensorCores.String())
	require.Equal(t, "auto", AttentionAuto.String())
	require.Equal(t, "fp32", AttentionFP32.String())
	require.Equal(t, "AttentionKernels(7)", AttentionKernels(7).String())
}

func TestDriverError(t *testing.T) {
	var err error = &DriverError{Call: "cuMemAlloc", Code: 2, Msg: "out of memory"}
	require.ErrorIs(t, err, ErrCUDA)
	var de *DriverError
	require.True(t, errors.As(err, &de))
	require.Equal(t, "gpu: cuMemAlloc failed: status 2 (out of memory)", err.Error())
}
