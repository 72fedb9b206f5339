package backend_test

import (
	"testing"

	"github.com/agentrl/agentrl/internal/cpu"
	"github.com/agentrl/agentrl/policy/backend"
	"github.com/agentrl/agentrl/policy/backend/backendtest"
)

// hostDecoderBackend is the CPU backend seen through a HostDecoder: the
// generic path of backends without a Decoder of their own.
type hostDecoderBackend struct {
	backend.Backend
	*backend.HostDecoder
}

// The generic path passes the Decoder conformance checks of backendtest.
func TestHostDecoderConformance(t *testing.T) {
	be := cpu.New()
	backendtest.Decoder(t, hostDecoderBackend{be, backend.NewHostDecoder(be)}, backendtest.DefaultTolerance())
}
