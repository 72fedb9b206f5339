package fleet

import (
	"context"
	"strconv"
	"sync"

	"github.com/agentrl/agentrl/lm"
)

// cutGate is the partial rollouts' gate: while a Publish runs no
// Generate starts, and each Generate learns whether a Publish began
// while it ran (epoch moved), which decides what its answers can be
// trusted to say about the weights that sampled them.
type cutGate struct {
	mu         sync.Mutex
	publishing bool
	epoch      uint64        // Publish calls begun
	changed    chan struct{} // closed and replaced when publishing ends
}

// enter waits until no Publish runs and returns the epoch.
func (g *cutGate) enter(ctx context.Context) (uint64, error) {
	g.mu.Lock()
	for g.publishing {
		ch := g.changed
		g.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		g.mu.Lock()
	}
	defer g.mu.Unlock()
	return g.epoch, nil
}

// since returns how many Publish calls began after epoch e.
func (g *cutGate) since(e uint64) uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.epoch - e
}

// begin starts a Publish: Generate calls wait from now on.
func (g *cutGate) begin() {
	g.mu.Lock()
	g.publishing = true
	g.epoch++
	g.mu.Unlock()
}

// end lets Generate calls start again.
func (g *cutGate) end() {
	g.mu.Lock()
	g.publishing = false
	close(g.changed)
	g.changed = make(chan struct{})
	g.mu.Unlock()
}

// generatePartial is Generate with Config.PartialRollouts. The version
// that sampled a generation is known for sure in two cases: no Publish
// began while the call ran (version v, read when it started), or one
// began and the servers cut the generation (lm.FinishAbort): a request
// the abort reached was running on v's weights. A generation that
// finished while a Publish began may instead have reached its server
// after the abort, waited for the new weights and run on them whole, so
// it is handed back as an interruption before its first token (no
// tokens, lm.FinishAbort), which the rollout engine continues from the
// same prefix on the new weights: no token is ever tagged with weights
// that did not sample it. With two Publish calls during one call even
// a cut generation is uncertain, and is handed back the same way.
func (f *Fleet) generatePartial(ctx context.Context, reqs []lm.GenerateRequest) ([]lm.Generation, error) {
	e, err := f.cuts.enter(ctx)
	if err != nil {
		return nil, err
	}
	v := strconv.FormatInt(f.version.Load(), 10)
	if err := f.readInitial(ctx); err != nil {
		return nil, err
	}
	gens, err := f.sampler.Generate(ctx, reqs)
	moved := f.cuts.since(e)
	for i := range gens {
		if moved > 1 || (moved == 1 && gens[i].FinishReason != lm.FinishAbort) {
			gens[i] = lm.Generation{Tokens: []int{}, FinishReason: lm.FinishAbort}
			if reqs[i].Params.Logprobs {
				gens[i].LogProbs, gens[i].RawLogProbs = []float32{}, []float32{}
			}
		}
		gens[i].WeightVersion = v
	}
	return gens, err
}

// publishPartial is Publish with Config.PartialRollouts: it writes the
// checkpoint while sampling goes on, then holds new Generate calls,
// has every server abort its generations in flight and load the
// checkpoint, and lets sampling go on with the new version.
func (f *Fleet) publishPartial(ctx context.Context, version int, w lm.Saver) error {
	f.publishing.Lock()
	defer f.publishing.Unlock()
	dir, err := f.write(version, func(dir string) error { return w.Save(dir, f.cfg.Save) })
	if err != nil {
		return err
	}
	f.cuts.begin()
	defer f.cuts.end()
	return f.updateAll(ctx, version, dir, true)
}
