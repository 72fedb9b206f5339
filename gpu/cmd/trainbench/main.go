// Command trainbench measures a training step of Qwen3-shaped models on a
// GPU with agentrl and with PyTorch side by side, in one run, and checks
// agentrl's log-probs against transformers' at the real vocabulary.
//
// For each shape (-shapes; Qwen3-0.6B and -1.7B at 8 × 1,024 tokens per
// step and Qwen3-4B at 4 × 1,024 by default) it builds the model with
// random weights drawn on the device (policy.WithBackendInit), AdamW with
// its state on the device (policy.Model.NewDeviceAdamW), and times steps
// of forward (per-token log-probs on the host), backward from the
// token-mean negative log-likelihood, gradient-norm clipping to 1 and
// AdamW, each phase ended by waiting for the device; then it releases the
// device and runs the same step in PyTorch (-torch, by default
// gpu/scripts/torch_train_bench.py: transformers' Qwen3ForCausalLM with
// float32 master weights, autocast bf16, SDPA attention and fused AdamW,
// on the same shape and batch). It prints one table: tokens/s of both and
// their ratio (the median step), MFU by verl's FLOP count
// (policy.Config.TrainingFLOPs, verl/utils/flops_counter.py) and with
// causal attention counted as half (TrainingFLOPsCausal), against -peak
// (989 TFLOP/s, verl's figure for the H100/H200), the peak device memory
// of both (agentrl's allocator in use, torch.cuda.max_memory_allocated),
// the split into forward, backward and optimizer, agentrl's device work
// per step (kernel launches, copies, host synchronizations), and with
// -kernels the device time of each kernel over one profiled step.
//
// The log-prob check (-check, on by default) saves one shape's random
// model (-check-shape) as a float32 checkpoint, computes the per-token
// log-probs of random sequences (-check-lens, packed in one batch) with
// agentrl in fp32 and in the benchmark's precision, and compares them with
// transformers' in float32 (-check-cmd, by default
// gpu/scripts/logprob_check.py), within bounds derived in checkBounds; a
// difference beyond them makes the program exit with status 1.
//
// Build it with the CUDA tag on any machine with Go and the CUDA headers,
// and run it from the repository root of a machine with the GPU and
// python3 with torch and transformers (gpu/scripts/trainbench.sh does
// both steps' second half and keeps the output):
//
//	go build -tags agentrl_cuda -o gpu/trainbench ./gpu/cmd/trainbench
//	./gpu/trainbench -kernels -out "$OUT"
//
// -checkpoint trains agentrl's side with activation checkpointing (each
// layer's forward recomputed in the backward: less memory, one more
// forward of the layers). -device cpu runs agentrl's side on the CPU
// backend instead (with -shapes tiny, a check of the program itself).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/agentrl/agentrl/device"
	"github.com/agentrl/agentrl/gpu"
)

// options are the flags.
type options struct {
	shapes    []shape
	device    device.Spec
	precision gpu.Precision
	steps     int
	warmup    int
	seed      uint64
	peak      float64 // FLOP/s of the device
	kernels   bool
	ckpt      bool   // agentrl with activation checkpointing
	torch     string // the PyTorch side's command; "" skips it
	check     bool
	checkSh   shape
	checkLens []int
	checkCmd  string
	checkDir  string
	out       string
	log       io.Writer
}

func (o options) logf(format string, args ...any) {
	fmt.Fprintf(o.log, "trainbench: "+format+"\n", args...)
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("trainbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := options{log: stderr}
	shapeList := fs.String("shapes", "qwen3-0.6b,qwen3-1.7b,qwen3-4b", "comma-separated shapes, each NAME or NAME:SEQSxLEN (qwen3-0.6b, qwen3-1.7b, qwen3-4b, tiny)")
	dev := fs.String("device", "cuda", "cuda, cuda:N or cpu")
	prec := fs.String("precision", "bf16", "GEMM precision of agentrl's side: bf16, tf32 or fp32")
	fs.IntVar(&o.steps, "steps", 5, "timed steps per shape (the median is reported)")
	fs.IntVar(&o.warmup, "warmup", 2, "untimed steps before them")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the weights and tokens")
	fs.Float64Var(&o.peak, "peak", 989e12, "the device's dense bf16 FLOP/s, for MFU (verl's H100/H200 figure)")
	fs.BoolVar(&o.kernels, "kernels", false, "also profile one step per shape and print the device time of each kernel")
	fs.BoolVar(&o.ckpt, "checkpoint", false, "train agentrl's side with activation checkpointing (policy.WithActivationCheckpointing)")
	fs.StringVar(&o.torch, "torch", "python3 gpu/scripts/torch_train_bench.py", "the PyTorch side's command (the shape's flags are appended); empty skips it")
	fs.BoolVar(&o.check, "check", true, "run the log-prob check against transformers")
	checkShape := fs.String("check-shape", "qwen3-0.6b", "the shape of the log-prob check's model")
	checkLens := fs.String("check-lens", "512,300,64", "the check's sequence lengths")
	fs.StringVar(&o.checkCmd, "check-cmd", "python3 gpu/scripts/logprob_check.py", "the check's reference command (--dir DIR is appended)")
	fs.StringVar(&o.checkDir, "check-dir", "", "keep the check's checkpoint, tokens and reference here (default: a temporary folder)")
	fs.StringVar(&o.out, "out", "", "also write the report to OUT/trainbench.md")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	if o.shapes, err = parseShapes(*shapeList); err != nil {
		return o, err
	}
	if o.device, err = device.ParseSpec(*dev); err != nil {
		return o, err
	}
	if o.device.Kind == device.Auto {
		return o, fmt.Errorf("-device %s: name cuda, cuda:N or cpu", *dev)
	}
	switch *prec {
	case "bf16":
		o.precision = gpu.BF16
	case "tf32":
		o.precision = gpu.TF32
	case "fp32":
		o.precision = gpu.FP32
	default:
		return o, fmt.Errorf("-precision %q: want bf16, tf32 or fp32", *prec)
	}
	if o.device.Kind == device.CPU {
		o.precision = gpu.FP32 // what the CPU computes in
	}
	if o.steps < 1 || o.warmup < 0 {
		return o, fmt.Errorf("-steps %d -warmup %d: want at least one step and no negative warm-up", o.steps, o.warmup)
	}
	if !(o.peak > 0) {
		return o, fmt.Errorf("-peak %g: want a positive FLOP/s", o.peak)
	}
	cs, err := parseShapes(*checkShape)
	if err != nil {
		return o, fmt.Errorf("-check-shape: %w", err)
	}
	o.checkSh = cs[0]
	for _, f := range strings.Split(*checkLens, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 2 || n > o.checkSh.cfg.MaxPositionEmbeddings {
			return o, fmt.Errorf("-check-lens %q: want lengths of 2 to %d tokens", *checkLens, o.checkSh.cfg.MaxPositionEmbeddings)
		}
		o.checkLens = append(o.checkLens, n)
	}
	return o, nil
}

// shapeResult is everything measured of one shape.
type shapeResult struct {
	s              shape
	agentrl, torch runResult
	torchRan       bool
}

// run measures every shape, runs the check, and writes the report to w;
// it returns false when the check failed.
func run(ctx context.Context, o options, w io.Writer) (bool, error) {
	var results []shapeResult
	for _, s := range o.shapes {
		r := shapeResult{s: s, agentrl: runAgentrl(ctx, o, s)}
		if r.agentrl.err != nil {
			o.logf("%s: agentrl: %v", s.name, r.agentrl.err)
		}
		if o.torch != "" {
			r.torchRan = true
			r.torch = runTorch(ctx, o, s)
			if r.torch.err != nil {
				o.logf("%s: PyTorch: %v", s.name, r.torch.err)
			}
		}
		results = append(results, r)
		// The report so far, shape by shape, so that a run killed by a
		// machine's time limit still leaves every shape it finished.
		if err := writeReport(o, report(o.partial(), results, nil, nil)); err != nil {
			return false, err
		}
		if err := ctx.Err(); err != nil {
			return false, err
		}
	}
	var checks []checkResult
	var checkErr error
	if o.check {
		checks, checkErr = runCheck(ctx, o, o.checkSh)
		if checkErr != nil {
			o.logf("log-prob check: %v", checkErr)
		}
	}
	rep := report(o, results, checks, checkErr)
	if _, err := io.WriteString(w, rep); err != nil {
		return false, err
	}
	if err := writeReport(o, rep); err != nil {
		return false, err
	}
	ok := checkErr == nil || !o.check
	for _, c := range checks {
		ok = ok && c.ok()
	}
	return ok, nil
}

// partial is o for a report written before the check has run: the
// check left out of it.
func (o options) partial() options {
	o.check = false
	return o
}

// writeReport writes rep to OUT/trainbench.md when -out is set, replacing
// what an earlier call wrote.
func writeReport(o options, rep string) error {
	if o.out == "" {
		return nil
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(o.out, "trainbench.md"), []byte(rep), 0o644)
}

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		if err == flag.ErrHelp {
			return
		}
		fmt.Fprintln(os.Stderr, "trainbench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	start := time.Now()
	ok, err := run(ctx, o, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "trainbench:", err)
		os.Exit(1)
	}
	o.logf("done in %v", time.Since(start).Round(time.Second))
	if !ok {
		fmt.Fprintln(os.Stderr, "trainbench: the log-prob check failed")
		os.Exit(1)
	}
}
