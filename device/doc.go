// Package device chooses where a policy model runs — this machine's CPU or
// a CUDA GPU — and in what precision, with one command-line shape that
// every program shares:
//
//	-device auto|cpu|cuda|cuda:N   -precision auto|fp32|tf32|bf16
//
// Config holds the two choices (RegisterFlags puts them on a
// flag.FlagSet); Open turns them into a backend.Backend for a given
// model, to pass to policy.New, policy.Load or policy.Model.Clone with
// policy.WithBackend, and into a one-line description of what was chosen
// and why (Device.String):
//
//	cfg, _ := policy.ReadConfig(dir)
//	d, err := device.Open(ctx, dc, cfg)   // dc from the flags
//	defer d.Close()                        // after the models on it
//	fmt.Fprintln(os.Stderr, "device:", d)
//	m, err := policy.Load(dir, policy.WithBackend(d.Backend()))
//
// # Devices
//
// cpu is the CPU backend (NewCPU), always available, float32 throughout.
// cuda:N is CUDA device N (cuda means cuda:0) through package gpu; it
// exists only in binaries built with the build tag agentrl_cuda and cgo
// (see package gpu and the README's GPU section): in other builds asking
// for it is an error that says so. auto, the default, opens CUDA device 0
// when the binary has CUDA support and the machine a usable GPU, and the
// CPU otherwise; Device.Fallback then holds the reason (not compiled in,
// no driver, no device, or the error the GPU gave), which the
// description repeats.
//
// # Precision
//
// The precision of the GPU's matrix products (gpu.Precision): fp32 is
// exact float32 and follows the CPU backend to float32 rounding; tf32
// and bf16 use tensor cores (bf16 also for attention, at head dims up to
// 128). auto depends on the model (DefaultPrecision): fp32 for models
// narrower than BF16MinHidden (1024) and bf16 from there on, which covers
// every Qwen3 size from 0.6B up. Measured on an NVIDIA H200 with
// examples/arith's model (hidden 128), the run takes the same time in
// every precision (≈ 90 s: such a model keeps the GPU idle) and bf16
// learned least (avg@8 30.1% → 49.2%, against 62.1% → 87.5% in fp32 and
// 58.2% → 95.7% in tf32), so a small model gains nothing from lower
// precision and keeps the CPU backend's numerics; a real model is bound
// by its products, which bf16 runs on tensor cores (a Qwen3-shaped
// model's log-probs stay within 7.3e-2 of transformers' float32 ones,
// 1.5e-2 on average), as PyTorch trainers run them under autocast. The
// CPU computes in float32 whatever the flag says; asking for tf32 or
// bf16 with -device cpu is an error.
//
// device may import package gpu, policy/backend and the CPU kernels
// (internal/cpu), and package policy for the model's configuration; no
// package below it imports it.
package device
