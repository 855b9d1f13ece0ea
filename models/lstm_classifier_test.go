package models

import "testing"

func TestGradLSTMClassifier(t *testing.T) {
	checkModel(t, Config{Name: "lstm", HiddenSize: 6}, Input{Shape: []int{1, 4, 5}, Classes: 3, YLen: 1}, 2, 30)
}

// TestGradLSTMClassifierChannels covers the channel transpose: each step reads
// one row of every channel.
func TestGradLSTMClassifierChannels(t *testing.T) {
	checkModel(t, Config{Name: "lstm", HiddenSize: 3}, Input{Shape: []int{2, 3, 2}, Classes: 3, YLen: 1}, 2, 20)
}
