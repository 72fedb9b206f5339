package device_test

import (
	"bytes"
	"context"
	"flag"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentrl/agentrl/device"
	"github.com/agentrl/agentrl/policy"
)

func TestParseSpec(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want device.Spec
		str  string // String of the result: the canonical spelling
	}{
		{"auto", device.Spec{Kind: device.Auto}, "auto"},
		{"cpu", device.Spec{Kind: device.CPU}, "cpu"},
		{"cuda", device.Spec{Kind: device.CUDA}, "cuda:0"},
		{"cuda:0", device.Spec{Kind: device.CUDA}, "cuda:0"},
		{"cuda:3", device.Spec{Kind: device.CUDA, Ordinal: 3}, "cuda:3"},
		{"cuda:007", device.Spec{Kind: device.CUDA, Ordinal: 7}, "cuda:7"},
		{"cuda:999999999", device.Spec{Kind: device.CUDA, Ordinal: 999999999}, "cuda:999999999"}, // 9 digits, the most
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := device.ParseSpec(tc.in)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.str, got.String())
			back, err := device.ParseSpec(got.String())
			require.NoError(t, err)
			assert.Equal(t, got, back, "String parses back")
		})
	}
}

func TestParseSpecErrors(t *testing.T) {
	for _, tc := range []struct{ in, msg string }{
		{"", `device "": want auto, cpu, cuda or cuda:N`},
		{"CPU", `device "CPU": want auto, cpu, cuda or cuda:N`},
		{"gpu", `want auto, cpu, cuda or cuda:N`},
		{" cpu", `want auto, cpu, cuda or cuda:N`},
		{"cuda0", `want auto, cpu, cuda or cuda:N`},
		{"cuda:", `N in cuda:N must be a device number`},
		{"cuda:-1", `N in cuda:N must be a device number`},
		{"cuda:+1", `N in cuda:N must be a device number`},
		{"cuda: 1", `N in cuda:N must be a device number`},
		{"cuda:1x", `N in cuda:N must be a device number`},
		{"cuda:0:1", `N in cuda:N must be a device number`},
		{"cuda:1234567890", `at most 9 digits`},           // 10 digits: could overflow an int32
		{"cuda:٣", `N in cuda:N must be a device number`}, // a non-ASCII digit
	} {
		t.Run(tc.in, func(t *testing.T) {
			_, err := device.ParseSpec(tc.in)
			require.ErrorIs(t, err, device.ErrInvalid)
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
}

func TestParsePrecision(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want device.Precision
	}{
		{"auto", device.PrecisionAuto},
		{"fp32", device.FP32},
		{"tf32", device.TF32},
		{"bf16", device.BF16},
	} {
		got, err := device.ParsePrecision(tc.in)
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, got, tc.in)
		assert.Equal(t, tc.in, got.String(), "String is the flag's spelling")
	}
	for _, in := range []string{"", "FP32", "fp16", "float32", "bf16 ", "32"} {
		_, err := device.ParsePrecision(in)
		require.ErrorIs(t, err, device.ErrInvalid, in)
		assert.Contains(t, err.Error(), "want auto, fp32, tf32 or bf16", in)
	}
	assert.Equal(t, "Precision(9)", device.Precision(9).String())
	assert.Equal(t, "Kind(7)", device.Kind(7).String())
}

// TestDefaultPrecision pins the rule of the package doc: bf16 from hidden
// size 1024 (BF16MinHidden) on, fp32 below. The hidden sizes are those of
// config.json: examples/arith's default model 128, Qwen3-0.6B 1024,
// Qwen3-1.7B 2048, Qwen3-4B 2560, Qwen3-8B 4096.
func TestDefaultPrecision(t *testing.T) {
	for _, tc := range []struct {
		name   string
		hidden int
		want   device.Precision
	}{
		{"unknown", 0, device.FP32},
		{"negative", -1, device.FP32},
		{"arith", 128, device.FP32},
		{"just below", 1023, device.FP32},
		{"Qwen3-0.6B", 1024, device.BF16},
		{"Qwen3-1.7B", 2048, device.BF16},
		{"Qwen3-4B", 2560, device.BF16},
		{"Qwen3-8B", 4096, device.BF16},
	} {
		assert.Equal(t, tc.want, device.DefaultPrecision(tc.hidden), tc.name)
	}
	assert.Equal(t, 1024, device.BF16MinHidden)
}

func TestConfigValidate(t *testing.T) {
	cpu, cuda := device.Spec{Kind: device.CPU}, device.Spec{Kind: device.CUDA, Ordinal: 1}
	for _, tc := range []struct {
		name string
		c    device.Config
		msg  string // empty: valid
	}{
		{"zero is auto/auto", device.Config{}, ""},
		{"cpu auto", device.Config{Device: cpu}, ""},
		{"cpu fp32", device.Config{Device: cpu, Precision: device.FP32}, ""},
		{"cpu tf32", device.Config{Device: cpu, Precision: device.TF32}, "-precision tf32 with -device cpu: the CPU backend computes in fp32 only"},
		{"cpu bf16", device.Config{Device: cpu, Precision: device.BF16}, "-precision bf16 with -device cpu"},
		{"auto bf16", device.Config{Precision: device.BF16}, ""},
		{"cuda tf32", device.Config{Device: cuda, Precision: device.TF32}, ""},
		{"unknown kind", device.Config{Device: device.Spec{Kind: 7}}, "device kind Kind(7)"},
		{"negative ordinal", device.Config{Device: device.Spec{Kind: device.CUDA, Ordinal: -1}}, "CUDA device number -1 is negative"},
		{"ordinal of the cpu", device.Config{Device: device.Spec{Kind: device.CPU, Ordinal: 2}}, "device number 2 given for cpu"},
		{"unknown precision", device.Config{Precision: 9}, "precision Precision(9)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.c.Validate()
			if tc.msg == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, device.ErrInvalid)
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
}

func TestRegisterFlags(t *testing.T) {
	parse := func(args ...string) (device.Config, error) {
		var c device.Config
		fs := flag.NewFlagSet("prog", flag.ContinueOnError)
		fs.SetOutput(new(bytes.Buffer))
		c.RegisterFlags(fs)
		return c, fs.Parse(args)
	}
	for _, tc := range []struct {
		args []string
		want device.Config
	}{
		{nil, device.Config{}},
		{[]string{"-device", "cpu"}, device.Config{Device: device.Spec{Kind: device.CPU}}},
		{[]string{"-device=cuda:2", "-precision=tf32"}, device.Config{Device: device.Spec{Kind: device.CUDA, Ordinal: 2}, Precision: device.TF32}},
		{[]string{"-precision", "bf16"}, device.Config{Precision: device.BF16}},
		{[]string{"-device", "cpu", "-batch-variant"}, device.Config{Device: device.Spec{Kind: device.CPU}, BatchVariant: true}},
	} {
		got, err := parse(tc.args...)
		require.NoError(t, err, tc.args)
		assert.Equal(t, tc.want, got, tc.args)
		// Args give the same Config to another program.
		back, err := parse(got.Args()...)
		require.NoError(t, err)
		assert.Equal(t, got, back, "Args %v", got.Args())
	}
	_, err := parse("-device", "gpu")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `invalid value "gpu" for flag -device`)
	assert.Contains(t, err.Error(), "want auto, cpu, cuda or cuda:N")
	_, err = parse("-precision", "fp16")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "want auto, fp32, tf32 or bf16")

	// Defaults other than the zero Config are kept until a flag is given.
	c := device.Config{Device: device.Spec{Kind: device.CPU}}
	fs := flag.NewFlagSet("prog", flag.ContinueOnError)
	c.RegisterFlags(fs)
	require.NoError(t, fs.Parse([]string{"-precision", "fp32"}))
	assert.Equal(t, device.Config{Device: device.Spec{Kind: device.CPU}, Precision: device.FP32}, c)
	assert.Equal(t, "-device cpu -precision fp32", c.String())
	c.BatchVariant = true
	assert.Equal(t, "-device cpu -precision fp32 -batch-variant", c.String())
}

// TestBatchVariant: -batch-variant opens the CPU backend whose few-row
// products are dot products (its name says so), and is refused with a
// CUDA device, where it would mean nothing.
func TestBatchVariant(t *testing.T) {
	ctx := context.Background()
	d, err := device.Open(ctx, device.Config{Device: device.Spec{Kind: device.CPU}, BatchVariant: true}, policy.Config{})
	require.NoError(t, err)
	defer d.Close()
	assert.Contains(t, d.Backend().Name(), "batch-variant few rows")
	assert.True(t, d.Config().BatchVariant)
	plain, err := device.Open(ctx, device.Config{Device: device.Spec{Kind: device.CPU}}, policy.Config{})
	require.NoError(t, err)
	defer plain.Close()
	assert.NotContains(t, plain.Backend().Name(), "batch-variant")

	err = device.Config{Device: device.Spec{Kind: device.CUDA}, BatchVariant: true}.Validate()
	require.ErrorIs(t, err, device.ErrInvalid)
	assert.Contains(t, err.Error(), "-batch-variant with -device cuda")
}
