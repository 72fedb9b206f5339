package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentrl/agentrl/device"
	"github.com/agentrl/agentrl/examples/internal/setup"
	"github.com/agentrl/agentrl/fleet"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/policy/openai"
	"github.com/agentrl/agentrl/serve"
)

// serveMode runs this program as one server of a local fleet: the model
// in dir, on the device dc chooses, behind package serve's vLLM/SGLang
// API on a free loopback port, playing the defaults of kind's engine
// (SGLang's starting version "default", vLLM's token bound and no
// versions), announced as the first line of stdout ("serving http://…"),
// until ctx ends (SIGTERM from the parent).
func serveMode(ctx context.Context, dir string, kind fleet.Kind, dc device.Config, stdout, stderr io.Writer) error {
	tok, err := newTokenizer() // the stop strings of the rollouts need it
	if err != nil {
		return err
	}
	m, dev, err := setup.LoadOnDevice(ctx, dc, dir, stderr, policy.WithDecoder(tok.Decode), policy.WithMaxSessions(512))
	if err != nil {
		return err
	}
	// The server closes the model (and the models of its reloads, which
	// load onto the same backend); the device goes after it.
	defer dev.Close()
	engine := serve.EngineSGLang
	if kind == fleet.VLLM || kind == fleet.VLLMModelConfig {
		engine = serve.EngineVLLM
	}
	srv, err := serve.New(serve.Config{
		Model: m, ModelPath: dir, Name: "arith", Encode: tok.Encode, Decode: tok.Decode,
		LogprobsMode: openai.ProcessedLogprobs, MaxSessions: 512, Engine: engine,
	})
	if err != nil {
		m.Close()
		return err
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	if _, err := fmt.Fprintf(stdout, "serving http://%s\n", ln.Addr()); err != nil {
		hs.Close()
		return err
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		fmt.Fprintf(stderr, "serve: shutdown: %v\n", err)
	}
	return nil
}

// localFleet is the serve processes this program started.
type localFleet struct {
	cmds []*exec.Cmd
	urls []string
}

// startServers starts n servers over the checkpoint in modelDir on the
// device dc names (copies of this program in serve mode, playing kind's
// engine, with dc's flags, unless command says otherwise) and waits for
// each to announce its address.
func startServers(ctx context.Context, n int, modelDir string, kind fleet.Kind, dc device.Config, command func(string, device.Config) *exec.Cmd, stderr io.Writer) (*localFleet, error) {
	if command == nil {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("-fleet: %w", err)
		}
		command = func(dir string, dc device.Config) *exec.Cmd {
			return exec.Command(exe, append([]string{"-serve", dir, "-fleet-kind", string(kind)}, dc.Args()...)...)
		}
	}
	lf := &localFleet{}
	for i := range n {
		cmd := command(modelDir, dc)
		cmd.Stderr = &prefixWriter{w: stderr, prefix: fmt.Sprintf("[server %d] ", i)}
		out, err := cmd.StdoutPipe()
		if err != nil {
			lf.Close()
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			lf.Close()
			return nil, fmt.Errorf("-fleet: starting server %d: %w", i, err)
		}
		lf.cmds = append(lf.cmds, cmd)
		url, err := announced(ctx, out)
		if err != nil {
			lf.Close()
			return nil, fmt.Errorf("-fleet: server %d: %w", i, err)
		}
		lf.urls = append(lf.urls, url)
	}
	return lf, nil
}

// announced reads a server's "serving <url>" line.
func announced(ctx context.Context, r io.Reader) (string, error) {
	line := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(r)
		if s.Scan() {
			line <- s.Text()
		}
		close(line)
		_, _ = io.Copy(io.Discard, r) // keep the pipe drained
	}()
	t := time.NewTimer(time.Minute)
	defer t.Stop()
	select {
	case l, ok := <-line:
		url, found := strings.CutPrefix(l, "serving ")
		if !ok || !found {
			return "", fmt.Errorf("did not announce its address (got %q)", l)
		}
		return url, nil
	case <-t.C:
		return "", errors.New("did not start within a minute")
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// Close stops the servers: SIGTERM, then SIGKILL after 5 s.
func (lf *localFleet) Close() {
	var wg sync.WaitGroup
	for _, c := range lf.cmds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = c.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { _ = c.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				_ = c.Process.Kill()
				<-done
			}
		}()
	}
	wg.Wait()
	lf.cmds = nil
}

// prefixWriter prefixes every write (a server's log line) with its name.
type prefixWriter struct {
	mu     sync.Mutex
	w      io.Writer
	prefix string
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := io.WriteString(p.w, p.prefix+string(b)); err != nil {
		return 0, err
	}
	return len(b), nil
}

// openFleet returns the fleet the RL rollouts sample from: -fleet N
// servers started here over modelDir (the policy RL starts from) on the
// device dc names (the trainer's), or the servers -fleet-servers names,
// which must read -fleet-dir; either way checked (fleet.Fleet.Check)
// before it is returned. stop ends what was started.
func openFleet(ctx context.Context, o options, dc device.Config, modelDir, runDir string, stderr io.Writer) (f *fleet.Fleet, stop func(), err error) {
	var servers []fleet.Server
	stop = func() {}
	dir := o.fleetDir
	if o.fleetServers != "" {
		for _, u := range strings.Split(o.fleetServers, ",") {
			servers = append(servers, fleet.Server{URL: strings.TrimSpace(u), Kind: fleet.Kind(o.fleetKind)})
		}
	} else {
		lf, err := startServers(ctx, o.fleet, modelDir, fleet.Kind(o.fleetKind), dc, o.serverCommand, stderr)
		if err != nil {
			return nil, nil, err
		}
		stop = lf.Close
		for _, u := range lf.urls {
			servers = append(servers, fleet.Server{URL: u, Kind: fleet.Kind(o.fleetKind)})
		}
		if dir == "" {
			dir = filepath.Join(runDir, "fleet")
		}
		fmt.Fprintf(stderr, "fleet: %d local servers at %s; weights published to %s\n", len(servers), strings.Join(lf.urls, ", "), dir)
	}
	sc := openai.Config{Model: o.remoteModel, LogprobsMode: openai.ProcessedLogprobs, MaxConcurrency: 512}
	if o.fleetServers != "" && fleet.Kind(o.fleetKind) == fleet.SGLang {
		// A real SGLang server returns token ids and log-probs through its
		// native /generate, not /v1/completions (this program's servers
		// answer both); its log-probs are after temperature, before
		// truncation, which arith's sampling (temperature 1, no top-p or
		// top-k) makes the behaviour policy's.
		sc.API, sc.LogprobsMode = openai.APISGLangGenerate, ""
	}
	fc := fleet.Config{Servers: servers, Dir: dir, Sampler: sc}
	if o.loraRank > 0 {
		// With LoRA the servers keep the SFT weights and hot-load each
		// step's adapter (vLLM and SGLang's load_lora_adapter).
		fc.Adapter = "arith-lora"
	}
	o.fleetVersion.Configure(&fc, false)
	f, err = fleet.New(fc)
	if err == nil {
		err = o.fleetVersion.Check(ctx, f)
	}
	if err != nil {
		stop()
		return nil, nil, fmt.Errorf("-fleet: %w", err)
	}
	if o.fleetServers != "" && o.loraRank == 0 {
		fmt.Fprintf(stderr, "fleet: %s; RL publishes its starting weights as version 0 before its first rollout, then version k after step k\n", o.fleetVersion.Describe(f, 0, false))
	}
	return f, stop, nil
}

// checkFleetVersion checks -fleet-version: only with -fleet-servers (the
// servers -fleet starts are fresh), and not with -lora-rank, whose
// servers keep their base weights.
func checkFleetVersion(o options) error {
	switch {
	case o.fleetVersion.Default():
		return nil
	case o.fleetServers == "":
		return errors.New("-fleet-version: only with -fleet-servers (the servers -fleet starts hold the weights RL starts from)")
	case o.loraRank > 0:
		return fmt.Errorf("-fleet-version %s with -lora-rank: the servers keep the base weights they were started with, whose version is not checked, and load each step's adapter by name", o.fleetVersion.String())
	}
	return nil
}
