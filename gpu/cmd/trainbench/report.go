package main

import (
	"fmt"
	"strings"
	"time"
)

// report renders the results as Markdown: the main table, the phases,
// agentrl's device work per step, the log-prob check, and the kernels.
func report(o options, results []shapeResult, checks []checkResult, checkErr error) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("## trainbench, %s\n\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	ck := ""
	if o.ckpt {
		ck = ", activation checkpointing"
	}
	p("agentrl on %s, precision %v%s; step = forward (log-probs on the host) + backward of the token-mean NLL + grad-norm clip 1.0 + AdamW (state on the device); median of %d steps after %d warm-up; MFU against %.0f TFLOP/s.\n", o.device, o.precision, ck, o.steps, o.warmup, o.peak/1e12)
	for _, r := range results {
		if r.torch.version != "" {
			p("PyTorch: %s; transformers Qwen3ForCausalLM, float32 master weights, autocast bf16, SDPA, fused AdamW, the same batch.\n", r.torch.version)
			break
		}
	}
	p("\n| shape | tokens/step | agentrl tokens/s | PyTorch tokens/s | ratio | MFU verl agentrl / PyTorch | MFU causal agentrl / PyTorch | peak GiB agentrl / PyTorch |\n")
	p("|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		a, t := sideNumbers(o, r.s, r.agentrl), sideNumbers(o, r.s, r.torch)
		ratio := "—"
		if a.tps > 0 && t.tps > 0 {
			ratio = fmt.Sprintf("%.2f×", a.tps/t.tps)
		}
		p("| %s | %d×%d | %s | %s | %s | %s / %s | %s / %s | %s / %s |\n", r.s.name, r.s.seqs, r.s.seqLen,
			a.tpsText(), t.tpsText(), ratio, a.pct(a.mfu), t.pct(t.mfu), a.pct(a.mfuCausal), t.pct(t.mfuCausal), gib(r.agentrl.peakInUse), gib(r.torch.peakInUse))
	}
	p("\nPhases, median ms (step / forward / backward / optimizer); peak reserved GiB:\n\n")
	p("| shape | agentrl | PyTorch | reserved agentrl / PyTorch |\n|---|---|---|---|\n")
	for _, r := range results {
		p("| %s | %s | %s | %s / %s |\n", r.s.name, phaseText(r.agentrl), phaseText(r.torch), gib(r.agentrl.peakReserved), gib(r.torch.peakReserved))
	}
	p("\nagentrl's device work per step (the timed steps' counts divided by their number):\n\n")
	p("| shape | kernel launches | cuBLAS products | H2D copies | H2D KiB | D2H copies | D2H KiB | host syncs | cuMemAlloc/Free |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		c := r.agentrl.perStep
		if c == nil {
			p("| %s | — | — | — | — | — | — | — | — |\n", r.s.name)
			continue
		}
		p("| %s | %d | %d | %d | %.1f | %d | %.1f | %d | %d/%d |\n", r.s.name, c.Launches, c.Gemms, c.HtoD, float64(c.HtoDBytes)/1024,
			c.DtoH, float64(c.DtoHBytes)/1024, c.HostSyncs(), c.DeviceAllocs, c.DeviceFrees)
	}
	if o.check {
		p("\nLog-prob check, %s with random weights, sequences of %v tokens packed in one batch, against transformers in float32:\n\n", o.checkSh.name, o.checkLens)
		if checkErr != nil {
			p("not run: %v\n", checkErr)
		} else {
			p("| agentrl precision | tokens | max abs Δ log p | mean abs Δ log p | bounds (max, mean) | verdict |\n|---|---|---|---|---|---|\n")
			for _, c := range checks {
				verdict := "ok"
				if !c.ok() {
					verdict = "**FAIL**"
				}
				p("| %s | %d | %.3g | %.3g | %.3g, %.3g | %s |\n", c.precision, c.tokens, c.maxDiff, c.meanDiff, c.maxBound, c.meanBound, verdict)
			}
		}
	}
	errs := false
	for _, r := range results {
		for _, e := range []struct {
			side string
			err  error
		}{{"agentrl", r.agentrl.err}, {"PyTorch", r.torch.err}} {
			if e.err != nil {
				if !errs {
					p("\nErrors:\n\n")
					errs = true
				}
				p("- %s, %s: %v\n", r.s.name, e.side, e.err)
			}
		}
	}
	for _, r := range results {
		if len(r.agentrl.kernels) == 0 {
			continue
		}
		var total time.Duration
		for _, k := range r.agentrl.kernels {
			total += k.Total
		}
		p("\nagentrl kernels of one profiled %s step (device time %.1f ms; top 25):\n\n", r.s.name, ms(total))
		p("| kernel | calls | ms | share |\n|---|---|---|---|\n")
		for i, k := range r.agentrl.kernels {
			if i == 25 {
				break
			}
			p("| %s | %d | %.2f | %.1f%% |\n", k.Name, k.Calls, ms(k.Total), 100*float64(k.Total)/float64(max(total, 1)))
		}
	}
	return b.String()
}

// side is one side's derived figures for a shape.
type side struct {
	tps, mfu, mfuCausal float64
	failed              bool
}

func sideNumbers(o options, s shape, r runResult) side {
	step, _ := r.medians()
	if r.err != nil && len(r.steps) == 0 || step <= 0 {
		return side{failed: r.err != nil}
	}
	sec := step.Seconds()
	return side{
		tps:       float64(s.tokens()) / sec,
		mfu:       s.cfg.TrainingFLOPs(s.lens()) / sec / o.peak,
		mfuCausal: s.cfg.TrainingFLOPsCausal(s.lens()) / sec / o.peak,
	}
}

func (s side) tpsText() string {
	if s.tps == 0 {
		if s.failed {
			return "failed"
		}
		return "—"
	}
	return fmt.Sprintf("%.0f", s.tps)
}

func (s side) pct(v float64) string {
	if s.tps == 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f%%", 100*v)
}

func phaseText(r runResult) string {
	step, ph := r.medians()
	if step == 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f / %.0f / %.0f / %.0f", ms(step), ms(ph.fwd), ms(ph.bwd), ms(ph.opt))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func gib(b uint64) string {
	if b == 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f", float64(b)/(1<<30))
}
