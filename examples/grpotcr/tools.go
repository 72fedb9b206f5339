package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/agentrl/agentrl/examples/internal/setup"
	"github.com/agentrl/agentrl/tool"
	"github.com/agentrl/agentrl/tool/mcp"
)

// toolSet is what the model may call — the code interpreter and the
// tools of the -mcp servers — and the executor the code reward runs its
// tests on.
type toolSet struct {
	list    []tool.Tool
	harness tool.Executor
	closers []func() error
}

// openTools starts the code sandbox (-sandbox) and connects to the -mcp
// servers, listing their tools. Close the set after training.
func openTools(ctx context.Context, o options, stderr io.Writer) (*toolSet, error) {
	code, harness, closeCode, err := setup.CodeTools(o.sandbox, o.sandboxWorkers, o.toolTimeout)
	if err != nil {
		return nil, err
	}
	ts := &toolSet{list: []tool.Tool{code}, harness: harness, closers: []func() error{closeCode}}
	for _, spec := range o.mcp {
		c, err := mcp.Connect(ctx, mcpConfig(spec, o.mcpPerTrajectory, o.toolTimeout, stderr))
		if err != nil {
			return nil, errors.Join(fmt.Errorf("-mcp %q: %w", spec, err), ts.Close())
		}
		ts.closers = append(ts.closers, c.Close)
		ts.list = append(ts.list, c.Tools()...)
		fmt.Fprintf(stderr, "grpotcr: mcp: %s: %d tools\n", c.Name(), len(c.Tools()))
	}
	return ts, nil
}

// mcpConfig is the client configuration of one -mcp value: a
// streamable-HTTP endpoint (an http(s) URL) or the command line of a
// stdio server, split at spaces.
// Each call is bounded by -tool-timeout; the server's standard error goes
// to the program's.
func mcpConfig(spec string, perTrajectory bool, timeout time.Duration, stderr io.Writer) mcp.Config {
	c := mcp.Config{PerTrajectory: perTrajectory, CallTimeout: timeout, Stderr: stderr}
	if strings.HasPrefix(spec, "http://") || strings.HasPrefix(spec, "https://") {
		c.URL = spec
	} else {
		c.Command = strings.Fields(spec)
	}
	return c
}

// Close stops the sandbox and the MCP servers.
func (ts *toolSet) Close() error {
	var errs []error
	for _, c := range ts.closers {
		errs = append(errs, c())
	}
	return errors.Join(errs...)
}
