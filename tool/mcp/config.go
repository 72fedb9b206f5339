package mcp

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/agentrl/agentrl/tool"
)

// ErrConfig is wrapped by the errors of Connect for an invalid Config.
var ErrConfig = errors.New("mcp: invalid configuration")

// WorkspaceArg is replaced, in each argument of Config.Command and in
// Config.Dir, by the session's workspace directory when
// Config.Workspace is set.
const WorkspaceArg = "{workspace}"

// Defaults of Config's zero fields.
const (
	DefaultCallTimeout    = 60 * time.Second
	DefaultConnectTimeout = 30 * time.Second
	DefaultPingTimeout    = 5 * time.Second
	DefaultShutdownGrace  = 2 * time.Second
	DefaultMaxRestarts    = 3
)

// Config says how to reach an MCP server and how to use it.
type Config struct {
	// Command runs a server over stdio: the program, then its arguments,
	// for example {"npx", "-y", "@modelcontextprotocol/server-everything"}.
	// The server runs in a process group of its own (on Linux it is
	// killed if this process dies), and its standard error is kept: the
	// last lines of it explain a server that exits.
	Command []string
	// Env holds KEY=value pairs added to this process's environment for
	// the server; Dir is its working directory (default this process's).
	Env []string
	Dir string
	// Stderr, when not nil, also receives the server's standard error.
	Stderr io.Writer

	// URL is the endpoint of a server over streamable HTTP, such as
	// "http://localhost:3001/mcp". Exactly one of Command and URL must
	// be set. HTTPClient makes the requests (authorization, TLS);
	// default http.DefaultClient.
	URL        string
	HTTPClient *http.Client

	// Name names the server in results' metadata and in errors; default
	// the name the server gives when it is initialized.
	Name string
	// Tools lists the server's tools to offer the model, in this order
	// (Connect fails if the server lacks one); empty means all of them,
	// in the server's order. Prefix is put before each tool's name, so
	// that the tools of two servers cannot clash.
	Tools  []string
	Prefix string

	// PerTrajectory gives each trajectory a session of its own: another
	// server process over stdio, another MCP session over HTTP. Use it
	// for servers that keep state — files written, a browser, a database
	// connection — so that the samples of a group do not see each
	// other's. Otherwise every trajectory shares one session.
	PerTrajectory bool
	// Workspace gives each session a new empty directory, created under
	// WorkspaceRoot (default os.TempDir()) when the session first
	// connects, kept across its restarts and removed when it closes. It
	// replaces WorkspaceArg in Command's arguments and Dir, and is the
	// server's working directory unless Dir says otherwise: for
	// example {"mcp-server-filesystem", "{workspace}"} gives every
	// trajectory a file system of its own. It needs Command.
	Workspace     bool
	WorkspaceRoot string

	// CallTimeout bounds each tool call; default DefaultCallTimeout. A
	// call past it fails, and the server is pinged (PingTimeout, default
	// DefaultPingTimeout): one that does not answer is taken for hung,
	// killed and restarted on the next call.
	CallTimeout time.Duration
	PingTimeout time.Duration
	// ConnectTimeout bounds starting the server and the MCP handshake;
	// default DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// ShutdownGrace is how long a stdio server has to exit once its
	// input is closed, and again after SIGTERM, before it is killed;
	// default DefaultShutdownGrace.
	ShutdownGrace time.Duration
	// MaxRestarts bounds how many times a session connects again after
	// its server died, hung or failed to start; default
	// DefaultMaxRestarts, negative for none. Past it the session's calls
	// fail at once with ErrUnavailable.
	MaxRestarts int

	// Budget bounds the text the model reads of each result (see
	// tool.OutputBudget); the zero value keeps tool.DefaultOutputChars
	// characters.
	Budget tool.OutputBudget
}

// withDefaults checks c and fills its zero fields.
func (c Config) withDefaults() (Config, error) {
	bad := func(format string, a ...any) (Config, error) {
		return Config{}, fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, a...))
	}
	switch {
	case len(c.Command) == 0 && c.URL == "":
		return bad("set Command (a stdio server) or URL (a streamable-HTTP server)")
	case len(c.Command) > 0 && c.URL != "":
		return bad("set only one of Command and URL")
	case len(c.Command) > 0 && c.Command[0] == "":
		return bad("Command has an empty program name")
	case c.Workspace && c.URL != "":
		return bad("Workspace needs a stdio server (Command)")
	case c.CallTimeout < 0 || c.PingTimeout < 0 || c.ConnectTimeout < 0 || c.ShutdownGrace < 0:
		return bad("negative timeout")
	}
	if c.URL != "" {
		u, err := url.Parse(c.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return bad("URL %q is not an http(s) URL", c.URL)
		}
	}
	if !c.Workspace {
		for _, a := range append([]string{c.Dir}, c.Command...) {
			if strings.Contains(a, WorkspaceArg) {
				return bad("%s appears in Command or Dir but Workspace is not set", WorkspaceArg)
			}
		}
	}
	seen := map[string]bool{}
	for _, name := range c.Tools {
		if seen[name] {
			return bad("Tools lists %q twice", name)
		}
		seen[name] = true
	}
	if err := c.Budget.Validate(); err != nil {
		return bad("Budget: %v", err)
	}
	if c.CallTimeout == 0 {
		c.CallTimeout = DefaultCallTimeout
	}
	if c.PingTimeout == 0 {
		c.PingTimeout = DefaultPingTimeout
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = DefaultConnectTimeout
	}
	if c.ShutdownGrace == 0 {
		c.ShutdownGrace = DefaultShutdownGrace
	}
	switch {
	case c.MaxRestarts == 0:
		c.MaxRestarts = DefaultMaxRestarts
	case c.MaxRestarts < 0:
		c.MaxRestarts = 0
	}
	if c.HTTPClient == nil {
		c.HTTPClient = http.DefaultClient
	}
	return c, nil
}
