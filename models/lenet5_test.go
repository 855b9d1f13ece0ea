package models

import (
	"strings"
	"testing"
)

func TestGradLeNet5(t *testing.T) {
	checkModel(t, Config{Name: "lenet5"}, Input{Shape: []int{1, 28, 28}, Classes: 10, YLen: 1}, 2, 8)
}

func TestLeNet5Accepts(t *testing.T) {
	for _, shape := range [][]int{{1, 28, 28}, {3, 32, 32}} {
		if err := lenet5Accepts(Config{}, Input{Shape: shape, Classes: 10, YLen: 1}); err != nil {
			t.Errorf("%v: %v", shape, err)
		}
	}
	for _, shape := range [][]int{{1, 30, 30}, {1, 28, 32}, {784}} {
		_, err := New(Config{Name: "lenet5"}, Input{Shape: shape, Classes: 10, YLen: 1}, 2, 0, 1)
		if err == nil || !strings.Contains(err.Error(), "lenet5") {
			t.Errorf("%v: error %v, expected a lenet5 input error", shape, err)
		}
	}
}
