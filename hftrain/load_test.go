package hftrain_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agentrl/agentrl/device"
	"github.com/agentrl/agentrl/dist"
	"github.com/agentrl/agentrl/hftrain"
)

func TestDeviceForRank(t *testing.T) {
	cuda := func(n int) device.Spec { return device.Spec{Kind: device.CUDA, Ordinal: n} }
	launched := func(local int) dist.Env {
		return dist.Env{Launcher: dist.Torchrun, Rank: 4 + local, Size: 8, LocalRank: local, LocalSize: 4}
	}
	for _, tc := range []struct {
		name    string
		dev     device.Spec
		env     dist.Env
		visible string // CUDA_VISIBLE_DEVICES; "" unset
		want    device.Spec
	}{
		{"alone", cuda(0), dist.Env{Launcher: dist.Alone, Size: 1}, "", cuda(0)},
		{"local rank 0 keeps its device", cuda(0), launched(0), "", cuda(0)},
		{"cuda means the rank's GPU", cuda(0), launched(3), "", cuda(3)},
		{"auto means the rank's GPU", device.Spec{Kind: device.Auto}, launched(2), "", cuda(2)},
		{"an explicit cuda:N is kept", cuda(1), launched(3), "", cuda(1)},
		{"cpu is kept", device.Spec{Kind: device.CPU}, launched(3), "", device.Spec{Kind: device.CPU}},
		{"one visible GPU per rank", cuda(0), launched(3), "5", cuda(0)},
		{"two visible GPUs", cuda(0), launched(3), "0,1", cuda(1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.visible != "" {
				t.Setenv("CUDA_VISIBLE_DEVICES", tc.visible)
			} else {
				t.Setenv("CUDA_VISIBLE_DEVICES", "")
				os.Unsetenv("CUDA_VISIBLE_DEVICES")
			}
			got := hftrain.DeviceForRank(device.Config{Device: tc.dev}, tc.env)
			assert.Equal(t, tc.want, got.Device)
		})
	}
}
