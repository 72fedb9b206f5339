package main

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"strings"

	"github.com/agentrl/agentrl/examples/internal/setup"
	"github.com/agentrl/agentrl/loss"
	"github.com/agentrl/agentrl/tool/search"
)

// checkValues checks each flag's value on its own.
func (o *options) checkValues() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"lr", o.lr}, {"temperature", o.temperature}, {"top-p", o.topP}, {"val-temperature", o.valTemperature}, {"val-top-p", o.valTopP}, {"lora-alpha", o.loraAlpha}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < 0 {
			return fmt.Errorf("-%s %v: want a finite, non-negative number", f.name, f.v)
		}
	}
	bad := fmt.Errorf
	switch {
	case o.model == "":
		return bad("-model is required")
	case o.train == "":
		return bad("-train is required")
	case o.out == "":
		return bad("-out is empty")
	case o.topP > 1:
		return bad("-top-p %v: want a number in [0, 1]", o.topP)
	case o.valTopP > 1:
		return bad("-val-top-p %v: want a number in [0, 1]", o.valTopP)
	case o.steps < 1:
		return bad("-steps %d: want at least 1", o.steps)
	case o.batch < 1:
		return bad("-batch %d: want at least 1", o.batch)
	case o.n < 2:
		return bad("-n %d: group-relative advantages need at least 2 samples per prompt", o.n)
	case o.miniBatch < 0:
		return bad("-mini-batch %d: want 0 (the whole batch) or more", o.miniBatch)
	case o.microBatch < 0:
		return bad("-micro-batch %d: want 0 (the mini-batch) or more", o.microBatch)
	case o.maxResponse < 1:
		return bad("-max-response %d: want at least 1", o.maxResponse)
	case o.maxPrompt < 0:
		return bad("-max-prompt %d: want 0 (what the model's context leaves) or more", o.maxPrompt)
	case o.maxTurns < 1:
		return bad("-max-turns %d: want at least 1", o.maxTurns)
	case o.overlongBuffer < 0 || o.overlongBuffer >= o.maxResponse:
		return bad("-overlong-buffer %d: want 0 ≤ buffer < -max-response %d", o.overlongBuffer, o.maxResponse)
	case o.valEvery < 0:
		return bad("-val-every %d: want 0 (only at the end) or more", o.valEvery)
	case o.valN < 1:
		return bad("-val-n %d: want at least 1", o.valN)
	case o.saveEvery < 0:
		return bad("-save-every %d: want 0 (only at the end) or more", o.saveEvery)
	case o.keep < 0:
		return bad("-keep %d: want 0 (all) or more", o.keep)
	case o.sandboxWorkers < 0:
		return bad("-sandbox-workers %d: want 0 (the default) or more", o.sandboxWorkers)
	case o.toolTimeout <= 0:
		return bad("-tool-timeout %v: want a positive duration", o.toolTimeout)
	case o.loraRank < 0:
		return bad("-lora-rank %d: want 0 (full weights) or more", o.loraRank)
	case o.fleetStaleness < 0:
		return bad("-fleet-staleness %d: want 0 (synchronous) or more", o.fleetStaleness)
	}
	if o.rolloutCorr != "" {
		if _, err := loss.RolloutCorrectionPreset(o.rolloutCorr); err != nil {
			return bad("-rollout-corr %q: want one of %s", o.rolloutCorr, strings.Join(loss.RolloutCorrectionPresets(), ", "))
		}
	}
	return nil
}

// checkBatches checks that the mini-batch divides the batch and the
// micro-batch the mini-batch; a micro-batch over the mini-batch becomes
// the mini-batch.
func (o *options) checkBatches() error {
	mini := o.miniBatch
	if mini == 0 {
		mini = o.batch * o.n
	}
	switch {
	case (o.batch*o.n)%mini != 0:
		return fmt.Errorf("-mini-batch %d does not divide the batch of %d trajectories (-batch × -n)", mini, o.batch*o.n)
	case o.microBatch > mini:
		o.microBatch = mini // a micro-batch is at most the mini-batch
	case o.microBatch > 0 && mini%o.microBatch != 0:
		return fmt.Errorf("-micro-batch %d does not divide the mini-batch of %d trajectories", o.microBatch, mini)
	}
	return nil
}

// checkJudge checks the judge's flags: -judge-url with a -judge-model
// and a known -judge-mode; the other judge flags only with -judge-url;
// -mcp-per-trajectory only with -mcp; then the search flags
// (checkSearch).
func (o *options) checkJudge(fs *flag.FlagSet) error {
	if o.judgeURL == "" {
		var set []string
		fs.Visit(func(f *flag.Flag) {
			if strings.HasPrefix(f.Name, "judge-") {
				set = append(set, "-"+f.Name)
			}
		})
		if len(set) > 0 {
			return fmt.Errorf("%s: only with -judge-url, the judge's endpoint", strings.Join(set, ", "))
		}
	} else {
		if err := setup.CheckServerURLs("-judge-url", o.judgeURL); err != nil {
			return err
		}
		switch {
		case len(setup.SplitList(o.judgeURL)) != 1:
			return fmt.Errorf("-judge-url: want one endpoint, got %q", o.judgeURL)
		case o.judgeModel == "":
			return errors.New("-judge-url needs -judge-model, the judge's served model name")
		case o.judgeMode != judgeRanking && o.judgeMode != judgePointwise:
			return fmt.Errorf("-judge-mode %q: want %s or %s", o.judgeMode, judgeRanking, judgePointwise)
		}
		if o.judgeRubric != "" {
			if err := setup.CheckFile(o.judgeRubric); err != nil {
				return fmt.Errorf("-judge-rubric: %w", err)
			}
		}
	}
	if o.mcpPerTrajectory && len(o.mcp) == 0 {
		return errors.New("-mcp-per-trajectory: only with -mcp, the servers")
	}
	return o.checkSearch(fs)
}

// checkSearch checks the search tool's flags: -search one http(s) URL,
// -search-topk at least 1, a known -search-format; the other -search-
// flags only with -search.
func (o *options) checkSearch(fs *flag.FlagSet) error {
	if o.search == "" {
		var set []string
		fs.Visit(func(f *flag.Flag) {
			if strings.HasPrefix(f.Name, "search-") {
				set = append(set, "-"+f.Name)
			}
		})
		if len(set) > 0 {
			return fmt.Errorf("%s: only with -search, the retrieval server", strings.Join(set, ", "))
		}
		return nil
	}
	if err := setup.CheckServerURLs("-search", o.search); err != nil {
		return err
	}
	switch {
	case len(setup.SplitList(o.search)) != 1:
		return fmt.Errorf("-search: want one retrieval server, got %q", o.search)
	case o.searchTopK < 1:
		return fmt.Errorf("-search-topk %d: want 1 or more", o.searchTopK)
	case search.Format(o.searchFormat) != search.FormatVerl && search.Format(o.searchFormat) != search.FormatSearchR1:
		return fmt.Errorf("-search-format %q: want %s or %s", o.searchFormat, search.FormatVerl, search.FormatSearchR1)
	}
	return nil
}

// checkPaths checks the model folder, the data files, the sampler and
// sandbox endpoints and the device.
func (o *options) checkPaths() error {
	if err := setup.CheckDir(o.model, "config.json", "tokenizer.json"); err != nil {
		return fmt.Errorf("-model: %w", err)
	}
	for _, f := range setup.SplitList(o.train) {
		if err := setup.CheckFile(f); err != nil {
			return fmt.Errorf("-train: %w", err)
		}
	}
	for _, f := range setup.SplitList(o.val) {
		if err := setup.CheckFile(f); err != nil {
			return fmt.Errorf("-val: %w", err)
		}
	}
	if o.val != "" && len(setup.SplitList(o.val)) == 0 || len(setup.SplitList(o.train)) == 0 {
		return errors.New("-train and -val must name files")
	}
	if err := setup.CheckEndpoints(o.sampler, o.sandbox); err != nil {
		return err
	}
	return o.device.Validate()
}
