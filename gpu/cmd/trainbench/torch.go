package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// torchResult is the JSON line ("RESULT {…}") torch_train_bench.py prints
// last: the phases of every timed step in milliseconds, the peaks of
// torch.cuda's allocator and the versions.
type torchResult struct {
	FwdMS        []float64 `json:"fwd_ms"`
	BwdMS        []float64 `json:"bwd_ms"`
	OptMS        []float64 `json:"opt_ms"`
	PeakAlloc    uint64    `json:"peak_allocated"`
	PeakReserved uint64    `json:"peak_reserved"`
	Torch        string    `json:"torch"`
	Transformers string    `json:"transformers"`
	Device       string    `json:"device"`
}

// torchArgs are the script's arguments for shape s: its sizes, batch and
// step counts.
func torchArgs(o options, s shape) []string {
	c := s.cfg
	kv := map[string]int{
		"--vocab": c.VocabSize, "--hidden": c.HiddenSize, "--intermediate": c.IntermediateSize,
		"--layers": c.NumHiddenLayers, "--heads": c.NumAttentionHeads, "--kv-heads": c.NumKeyValueHeads,
		"--head-dim": c.HeadDim, "--seqs": s.seqs, "--seq-len": s.seqLen, "--steps": o.steps, "--warmup": o.warmup,
	}
	order := []string{"--vocab", "--hidden", "--intermediate", "--layers", "--heads", "--kv-heads", "--head-dim", "--seqs", "--seq-len", "--steps", "--warmup"}
	args := make([]string, 0, 2*len(order)+4)
	for _, k := range order {
		args = append(args, k, strconv.Itoa(kv[k]))
	}
	args = append(args, "--rope-theta", strconv.FormatFloat(c.RopeTheta, 'g', -1, 64), "--seed", strconv.FormatUint(o.seed, 10))
	return args
}

// runTorch runs the PyTorch side of shape s as a child process (after
// agentrl's side has released the device) and reads its result.
func runTorch(ctx context.Context, o options, s shape) runResult {
	cmd := strings.Fields(o.torch)
	if len(cmd) == 0 {
		return runResult{err: errors.New("no -torch command")}
	}
	o.logf("%s: PyTorch: %s", s.name, strings.Join(append(cmd, torchArgs(o, s)...), " "))
	c := exec.CommandContext(ctx, cmd[0], append(cmd[1:], torchArgs(o, s)...)...)
	var stdout bytes.Buffer
	c.Stdout = &stdout
	c.Stderr = o.log
	err := c.Run()
	res, perr := parseTorch(stdout.Bytes())
	if err != nil {
		res.err = fmt.Errorf("%s: %w", strings.Join(cmd, " "), err)
	} else if perr != nil {
		res.err = perr
	}
	return res
}

// parseTorch reads the last "RESULT " line of the script's output.
func parseTorch(out []byte) (runResult, error) {
	var line string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "RESULT "); ok {
			line = rest
		}
	}
	if line == "" {
		return runResult{}, errors.New("the PyTorch script printed no RESULT line")
	}
	var t torchResult
	if err := json.Unmarshal([]byte(line), &t); err != nil {
		return runResult{}, fmt.Errorf("the PyTorch script's RESULT line: %w", err)
	}
	if len(t.FwdMS) == 0 || len(t.FwdMS) != len(t.BwdMS) || len(t.FwdMS) != len(t.OptMS) {
		return runResult{}, fmt.Errorf("the PyTorch script's RESULT line has %d, %d and %d phase times", len(t.FwdMS), len(t.BwdMS), len(t.OptMS))
	}
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	r := runResult{peakInUse: t.PeakAlloc, peakReserved: t.PeakReserved,
		version: fmt.Sprintf("torch %s, transformers %s, %s", t.Torch, t.Transformers, t.Device)}
	for i := range t.FwdMS {
		r.steps = append(r.steps, phases{fwd: ms(t.FwdMS[i]), bwd: ms(t.BwdMS[i]), opt: ms(t.OptMS[i])})
	}
	return r, nil
}
