package agentrl

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestHeadline: an SFT step's headline is its loss and its forward
// tokens; an RL step's its mean reward and accuracy and the tokens it
// generated (40) and trained on (160), 200 in all.
func TestHeadline(t *testing.T) {
	figs, tokens := SFTMetrics{Step: 1, Loss: 1.25, SeqTokens: 300, Tokens: 120}.headline()
	assert.Equal(t, []Figure{{"loss", 1.25}}, figs)
	assert.Equal(t, int64(300), tokens)

	figs, tokens = StepMetrics{Step: 2, RewardMean: -0.5, Acc: 0.25, generatedTokens: 40, trainedTokens: 160}.headline()
	assert.Equal(t, []Figure{{"reward", -0.5}, {"acc", 0.25}}, figs)
	assert.Equal(t, int64(200), tokens)
}
