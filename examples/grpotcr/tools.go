package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"mvdan.cc/sh/v3/shell"

	"github.com/agentrl/agentrl/examples/internal/setup"
	"github.com/agentrl/agentrl/tool"
	"github.com/agentrl/agentrl/tool/mcp"
	"github.com/agentrl/agentrl/tool/search"
)

// toolSet is what the model may call — the code interpreter, the tools
// of the -mcp servers and the -search tool — and the executor the code
// reward runs its tests on.
type toolSet struct {
	list    []tool.Tool
	harness tool.Executor
	closers []func() error
}

// openTools starts the code sandbox (-sandbox), connects to the -mcp
// servers, listing their tools, and asks the -search server one query.
// Close the set after training.
func openTools(ctx context.Context, o options, stderr io.Writer) (*toolSet, error) {
	code, harness, closeCode, err := setup.CodeTools(o.sandbox, o.sandboxWorkers, o.toolTimeout)
	if err != nil {
		return nil, err
	}
	ts := &toolSet{list: []tool.Tool{code}, harness: harness, closers: []func() error{closeCode}}
	for _, spec := range o.mcp {
		cfg, err := mcpConfig(spec, o.mcpPerTrajectory, o.toolTimeout, stderr)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("-mcp %q: %w", spec, err), ts.Close())
		}
		c, err := mcp.Connect(ctx, cfg)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("-mcp %q: %w", spec, err), ts.Close())
		}
		ts.closers = append(ts.closers, c.Close)
		ts.list = append(ts.list, c.Tools()...)
		fmt.Fprintf(stderr, "grpotcr: mcp: %s: %d tools\n", c.Name(), len(c.Tools()))
	}
	if o.search != "" {
		st, err := searchTool(ctx, o, stderr)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("-search %s: %w", o.search, err), ts.Close())
		}
		ts.list = append(ts.list, st)
	}
	return ts, nil
}

// searchProbe is the query searchTool sends before training.
const searchProbe = "test"

// searchTool is the search tool over the -search server: -search-topk
// passages per query, written as -search-format says, each HTTP attempt
// bounded by -tool-timeout and retried as verl retries (the rollout's
// tool timeout bounds the whole call). It first sends the server one
// query, once, without retries, so that a wrong URL, a server that is
// down or one that does not speak the API stops the run before anything
// trains.
func searchTool(ctx context.Context, o options, stderr io.Writer) (*search.Tool, error) {
	probe, err := search.NewClient(search.ClientConfig{URL: o.search, TopK: 1, AttemptTimeout: o.toolTimeout, MaxAttempts: -1})
	if err != nil {
		return nil, err
	}
	if _, err := probe.Do(ctx, search.Request{Queries: []string{searchProbe}, TopK: 1}); err != nil {
		return nil, fmt.Errorf("the retrieval server did not answer a query: %w", err)
	}
	c, err := search.NewClient(search.ClientConfig{URL: o.search, TopK: o.searchTopK, AttemptTimeout: o.toolTimeout})
	if err != nil {
		return nil, err
	}
	st, err := search.NewTool(c, search.ToolConfig{Format: search.Format(o.searchFormat)})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(stderr, "grpotcr: search: %s, top %d, %s text\n", c.Endpoint(), o.searchTopK, o.searchFormat)
	return st, nil
}

// mcpConfig is the client configuration of one -mcp value: a
// streamable-HTTP endpoint (an http(s) URL) or the command line of a
// stdio server, split into words by mcpCommand. Each call is bounded by
// -tool-timeout; the server's standard error goes to the program's.
func mcpConfig(spec string, perTrajectory bool, timeout time.Duration, stderr io.Writer) (mcp.Config, error) {
	c := mcp.Config{PerTrajectory: perTrajectory, CallTimeout: timeout, Stderr: stderr}
	if isURL(spec) {
		c.URL = spec
		return c, nil
	}
	var err error
	c.Command, err = mcpCommand(spec)
	return c, err
}

// isURL reports whether an -mcp value names a streamable-HTTP endpoint.
func isURL(spec string) bool {
	return strings.HasPrefix(spec, "http://") || strings.HasPrefix(spec, "https://")
}

// mcpCommand splits a stdio server's command line into words as a POSIX
// shell splits a command's arguments (mvdan.cc/sh's shell.Fields): quotes
// and backslashes group words ("npx -y server-filesystem '/data/my
// files'"), $VAR and ~ expand from the environment; command substitution
// and globs are refused or left as they are, and nothing runs a shell.
func mcpCommand(line string) ([]string, error) {
	words, err := shell.Fields(line, nil)
	if err != nil {
		return nil, fmt.Errorf("splitting the command line: %w", err)
	}
	if len(words) == 0 {
		return nil, errors.New("no command")
	}
	return words, nil
}

// Close stops the sandbox and the MCP servers.
func (ts *toolSet) Close() error {
	var errs []error
	for _, c := range ts.closers {
		errs = append(errs, c())
	}
	return errors.Join(errs...)
}
