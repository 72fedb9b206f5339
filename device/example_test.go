package device_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/agentrl/agentrl/device"
	"github.com/agentrl/agentrl/policy"
)

// A program registers -device and -precision, opens the device for its
// model, says what it chose, and runs the model on it.
func ExampleOpen() {
	var dc device.Config
	fs := flag.NewFlagSet("train", flag.ContinueOnError)
	dc.RegisterFlags(fs)
	if err := fs.Parse([]string{"-device", "cpu"}); err != nil {
		fmt.Println(err)
		return
	}
	cfg := policy.Config{
		ModelType: policy.ModelQwen3, VocabSize: 32, HiddenSize: 64, IntermediateSize: 128,
		NumHiddenLayers: 2, NumAttentionHeads: 4, NumKeyValueHeads: 2, HeadDim: 16,
		MaxPositionEmbeddings: 128, RMSNormEps: 1e-6, RopeTheta: 10000, TieWordEmbeddings: true,
	}
	d, err := device.Open(context.Background(), dc, cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close() // after the model: defers run last in, first out
	fmt.Fprintln(os.Stderr, "device:", d)

	m, err := policy.New(cfg, 1, policy.WithBackend(d.Backend()))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	fmt.Println(d.Config(), strings.HasPrefix(m.Backend().Name(), "cpu("))
	// Output: -device cpu -precision fp32 true
}

// auto falls back to the CPU when the binary or the machine has no GPU,
// and says why.
func ExampleDevice_Fallback() {
	d, err := device.Open(context.Background(), device.Config{}, policy.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	if err := d.Fallback(); err != nil {
		fmt.Fprintln(os.Stderr, "no GPU:", err)
	}
	fmt.Println(d.Config().Device.Kind == device.CPU || d.Fallback() == nil)
	// Output: true
}

func ExampleParseSpec() {
	for _, s := range []string{"auto", "cuda", "cuda:1", "gpu"} {
		spec, err := device.ParseSpec(s)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Println(spec)
	}
	// Output:
	// auto
	// cuda:0
	// cuda:1
	// device: invalid choice: device "gpu": want auto, cpu, cuda or cuda:N
}

// The precision -precision auto gives examples/arith's model and three
// Qwen3 sizes.
func ExampleDefaultPrecision() {
	for _, m := range []struct {
		name   string
		hidden int
	}{{"arith", 128}, {"Qwen3-0.6B", 1024}, {"Qwen3-4B", 2560}} {
		fmt.Println(m.name, device.DefaultPrecision(m.hidden))
	}
	// Output:
	// arith fp32
	// Qwen3-0.6B bf16
	// Qwen3-4B bf16
}

// A program outside this module runs a model on the CPU backend with a
// chosen number of worker goroutines.
func ExampleNewCPU() {
	cfg := policy.Config{
		ModelType: policy.ModelQwen3, VocabSize: 32, HiddenSize: 32, IntermediateSize: 64,
		NumHiddenLayers: 1, NumAttentionHeads: 2, NumKeyValueHeads: 1, HeadDim: 16,
		MaxPositionEmbeddings: 64, RMSNormEps: 1e-6, RopeTheta: 10000, TieWordEmbeddings: true,
	}
	m, err := policy.New(cfg, 1, policy.WithBackend(device.NewCPU(2)))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	fmt.Println(strings.HasSuffix(m.Backend().Name(), ", 2 workers)"))
	// Output: true
}

// A program that starts another one (a server) gives it the device it
// opened.
func ExampleConfig_Args() {
	c := device.Config{Device: device.Spec{Kind: device.CUDA, Ordinal: 1}, Precision: device.TF32}
	fmt.Println(c.Args())
	// Output: [-device cuda:1 -precision tf32]
}
