package agentrl

import (
	"context"
	"fmt"
	"strings"

	"github.com/agentrl/agentrl/dist"
	"github.com/agentrl/agentrl/loss"
)

// mismatchRows are the rows loss.MismatchMetrics reads, one per
// trajectory: its response's recomputed (old) and sampled
// log-probabilities, its loss mask and its prompt's data source.
type mismatchRows struct {
	Old, Rollout, Mask [][]float32
	Sources            []string
}

// measureMismatch records in m the rollout-vs-trainer mismatch of the
// step's batch (loss.MismatchMetrics over every rank's trajectories, as
// verl's driver measures its whole batch) where verl's decoupled mode
// does: after the old log-probabilities are recomputed, before any
// update. It records nothing when the trainer takes the sampler's
// log-probabilities as the old ones (there is nothing to compare;
// in bypass mode the loss reports the rollout_corr/ metrics of the
// current policy instead) or when a trajectory on any rank has none.
func (t *Trainer) measureMismatch(ctx context.Context, batch []*sample, m *StepMetrics) error {
	if !t.cfg.recompute() {
		return nil
	}
	have := []float64{1}
	for _, s := range batch {
		if len(s.traj.LogProbs) != len(s.traj.Tokens) {
			have[0] = 0
		}
	}
	if err := t.job.reduce(ctx, have, dist.Min); err != nil {
		return fmt.Errorf("agentrl: step %d: mismatch metrics: %w", m.Step, err)
	}
	if have[0] == 0 {
		return nil
	}
	var rows mismatchRows
	for _, s := range batch {
		rows.Old = append(rows.Old, s.old)
		rows.Rollout = append(rows.Rollout, s.traj.LogProbs[s.traj.PromptLen:])
		rows.Mask = append(rows.Mask, s.respMask())
		rows.Sources = append(rows.Sources, s.prompt.DataSource)
	}
	rows, err := t.job.gatherMismatch(ctx, rows)
	if err != nil {
		return fmt.Errorf("agentrl: step %d: %w", m.Step, err)
	}
	mm, err := loss.MismatchMetrics(rows.Old, rows.Rollout, rows.Mask, rows.Sources)
	if err != nil {
		return fmt.Errorf("%w: step %d: %w", ErrTrainer, m.Step, err)
	}
	m.Mismatch = mm
	return nil
}

// rolloutCorrMetrics returns the rollout_corr/ keys of the loss's
// metrics (the IS weights' and rejection's, and bypass mode's off-policy
// measures), as verl logs them.
func rolloutCorrMetrics(lossMetrics map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range lossMetrics {
		if strings.HasPrefix(k, "rollout_corr/") {
			out[k] = v
		}
	}
	return out
}
