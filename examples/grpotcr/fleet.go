package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/agentrl/agentrl/checkpoint"
	"github.com/agentrl/agentrl/examples/internal/setup"
	"github.com/agentrl/agentrl/fleet"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy/openai"
)

// adapterName is the name the -fleet-servers load the policy's LoRA
// adapters under, with the version: grpotcr-lora-v00000042.
const adapterName = "grpotcr-lora"

// checkFleetFlags checks the flags of on-policy training against
// running servers: -fleet-servers with the -fleet-dir they read and a
// -fleet-kind, not beside a remote -sampler; the other fleet flags only
// with -fleet-servers.
func checkFleetFlags(fs *flag.FlagSet, o options) error {
	if o.fleetServers == "" {
		var stray []string
		fs.Visit(func(f *flag.Flag) {
			if f.Name == "fleet-kind" || f.Name == "fleet-dir" || f.Name == "fleet-staleness" || f.Name == "fleet-version" || f.Name == "fleet-partial" {
				stray = append(stray, "-"+f.Name)
			}
		})
		if len(stray) > 0 {
			return fmt.Errorf("%s: only with -fleet-servers, the servers to train against", strings.Join(stray, ", "))
		}
		return nil
	}
	if err := setup.CheckServerURLs("-fleet-servers", o.fleetServers); err != nil {
		return err
	}
	switch {
	case o.sampler != "local":
		return errors.New("-fleet-servers and -sampler URL both sample on servers: -fleet-servers trains on-policy (the servers get the weights after every step), -sampler off-policy (they keep theirs); give one")
	case o.fleetDir == "":
		return errors.New("-fleet-servers needs -fleet-dir, the folder the weights are published to, which every server reads under the same path")
	case o.fleetPartial && o.loraRank > 0:
		return errors.New("-fleet-partial with -lora-rank: partial rollouts across adapter updates are not supported (the adapter is switched between turns)")
	case o.loraRank > 0 && !o.fleetVersion.Default():
		return fmt.Errorf("-fleet-version %s with -lora-rank: the servers keep the base weights they were started with, whose version is not checked, and load each step's adapter by name", o.fleetVersion.String())
	}
	switch fleet.Kind(o.fleetKind) {
	case fleet.SGLang, fleet.VLLM, fleet.VLLMModelConfig:
	default:
		return fmt.Errorf("-fleet-kind %q: want sglang, vllm or vllm-model-config", o.fleetKind)
	}
	return nil
}

// openFleet returns the fleet of the -fleet-servers, checked
// (fleet.Fleet.Check: each answers, serves -served-model when given,
// takes weight updates, and agrees with the others on its starting
// version) before anything is loaded or trained. SGLang servers are
// sampled through SGLang's native /generate, which returns token ids and
// log-probabilities (after temperature, before top-p and top-k); vLLM's
// /v1/completions with processed log-probabilities (vLLM started with
// --logprobs-mode processed_logprobs). With -lora-rank the servers keep
// their weights and hot-load each step's adapter.
func openFleet(ctx context.Context, o options, stderr io.Writer) (*fleet.Fleet, error) {
	kind := fleet.Kind(o.fleetKind)
	var servers []fleet.Server
	for _, u := range setup.SplitList(o.fleetServers) {
		servers = append(servers, fleet.Server{URL: u, Kind: kind})
	}
	sc := openai.Config{Model: o.servedModel, LogprobsMode: openai.ProcessedLogprobs}
	if kind == fleet.SGLang {
		sc.API, sc.LogprobsMode = openai.APISGLangGenerate, ""
	}
	fc := fleet.Config{Servers: servers, Dir: o.fleetDir, Sampler: sc, PartialRollouts: o.fleetPartial}
	what := "weights"
	if o.loraRank > 0 {
		fc.Adapter, what = adapterName, "LoRA adapters ("+adapterName+"-vN)"
	}
	start, resumed, err := resumeStep(o)
	if err != nil {
		return nil, err
	}
	o.fleetVersion.Configure(&fc, resumed)
	f, err := fleet.New(fc)
	if err != nil {
		return nil, fmt.Errorf("-fleet-servers: %w", err)
	}
	if err := o.fleetVersion.Check(ctx, f); err != nil {
		return nil, fmt.Errorf("-fleet-servers: %w", err)
	}
	fmt.Fprintf(stderr, "grpotcr: fleet: %d %s servers (%s) checked; the rollouts are sampled there (η = %d: at most that many steps ahead of training), and the %s published to %s as version %d before the first step, then as version k after step k\n",
		len(servers), kind, strings.Join(setup.SplitList(o.fleetServers), ", "), o.fleetStaleness, what, o.fleetDir, start)
	if o.loraRank == 0 {
		fmt.Fprintf(stderr, "grpotcr: fleet: %s\n", o.fleetVersion.Describe(f, start, resumed))
	}
	return f, nil
}

// resumeStep is the step the run starts from: with -resume that of the
// newest checkpoint under -out, if there is one (resumed), else 0.
func resumeStep(o options) (step int, resumed bool, err error) {
	if !o.resume {
		return 0, false, nil
	}
	step, err = checkpoint.Root{Dir: filepath.Join(o.out, checkpointsDir)}.ResumeStep()
	switch {
	case err != nil:
		return 0, false, fmt.Errorf("-resume: %w", err)
	case step < 0:
		return 0, false, nil
	}
	return step, true, nil
}

// resetFleet publishes the weights a new run starts from to the
// -fleet-servers as version 0 under -fleet-version reset, before anything
// samples them (rank 0 publishes for the job); nothing otherwise.
func resetFleet(ctx context.Context, o options, f *fleet.Fleet, w lm.Saver, leader bool) error {
	if f == nil {
		return nil
	}
	_, resumed, err := resumeStep(o)
	if err != nil {
		return err
	}
	return o.fleetVersion.Reset(ctx, f, w, resumed, leader)
}
