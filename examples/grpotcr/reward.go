package main

import (
	"context"
	"fmt"
	"os"

	"github.com/agentrl/agentrl"
	"github.com/agentrl/agentrl/examples/internal/setup"
	"github.com/agentrl/agentrl/reward/judge"
	"github.com/agentrl/agentrl/tool"
)

// Judging modes of -judge-mode.
const (
	judgeRanking   = "ranking"
	judgePointwise = "pointwise"
)

// pointwiseRubric is the rubric of -judge-mode pointwise when
// -judge-rubric names no file.
const pointwiseRubric = `Grade the response to the task on a scale from 0 to 10.
10: the final answer is correct (it matches the reference answer when one is given) and the reasoning supports it.
5: the approach is sound but the final answer is wrong or missing.
0: the response is off-topic, empty or nonsense.`

// scoring is the reward side of the trainer's parts: Reward or
// GroupReward, with the judge's metrics and whether the prompts need a
// ground truth.
type scoring struct {
	parts      agentrl.TrainerParts
	needsTruth bool
}

// newReward returns Open-AgentRL's rule reward (reward.OpenAgentRL, code
// tests on harness), which needs each prompt's ground truth; or, with
// -judge-url, the judge's: a group ranking or a pointwise grade, checked
// for an answer before anything trains, its statistics in every step's
// metrics under "judge/". A judge reads the ground truth as a reference
// where a row has one.
func newReward(ctx context.Context, o options, harness tool.Executor) (scoring, error) {
	if o.judgeURL == "" {
		rf, err := setup.NewReward(harness, o.toolBonus)
		return scoring{parts: agentrl.TrainerParts{Reward: rf}, needsTruth: true}, err
	}
	j, err := judge.New(judge.Config{BaseURL: o.judgeURL, Model: o.judgeModel, APIKeyEnv: o.judgeKeyEnv, Seed: o.seed})
	if err != nil {
		return scoring{}, fmt.Errorf("-judge-url: %w", err)
	}
	if err := j.Check(ctx); err != nil {
		return scoring{}, fmt.Errorf("-judge-url: %w", err)
	}
	rubric, err := judgeRubric(o)
	if err != nil {
		return scoring{}, err
	}
	parts := agentrl.TrainerParts{
		GroundTruthOptional: true,
		RewardMetrics:       func() map[string]float64 { return j.TakeStats().Metrics("judge/") },
	}
	if o.judgeMode == judgeRanking {
		parts.GroupReward, err = j.Ranking(judge.RankingConfig{Rubric: rubric})
	} else {
		parts.Reward, err = j.Pointwise(judge.PointwiseConfig{Rubric: rubric})
	}
	if err != nil {
		return scoring{}, fmt.Errorf("-judge-mode %s: %w", o.judgeMode, err)
	}
	return scoring{parts: parts}, nil
}

// judgeRubric is the text of the -judge-rubric file; without one, the
// ranking's default (judge.DefaultRankingRubric) or pointwiseRubric.
func judgeRubric(o options) (string, error) {
	if o.judgeRubric != "" {
		b, err := os.ReadFile(o.judgeRubric)
		if err != nil {
			return "", fmt.Errorf("-judge-rubric: %w", err)
		}
		return string(b), nil
	}
	if o.judgeMode == judgePointwise {
		return pointwiseRubric, nil
	}
	return "", nil
}
