package models

import (
	"fmt"
	"sort"

	G "gorgonia.org/gorgonia"
)

// entry is one registered model: a function that adds its layers to a graph and
// returns logits of shape (batch*YLen, Classes), plus what input it accepts.
type entry struct {
	build   func(b *builder, x *G.Node, in Input, batch int) *G.Node
	accepts func(cfg Config, in Input) error
	tokens  bool // reads token ids (fed as one-hot rows) rather than real values
}

// registry maps a model name to its builder.
var registry = map[string]entry{
	"mlp":      {build: buildMLP, accepts: anyImage},
	"lenet5":   {build: buildLeNet5, accepts: lenet5Accepts},
	"resnet20": {build: buildResNet, accepts: image3D},
	"resnet32": {build: buildResNet, accepts: image3D},
	"resnet56": {build: buildResNet, accepts: image3D},
	"lstm":     {build: buildLSTMClassifier, accepts: lstmAccepts},
	"charlstm": {build: buildCharLSTM, accepts: charLSTMAccepts, tokens: true},
}

// Names returns the registered model names, sorted.
func Names() []string {
	out := make([]string, 0, len(registry))
	for name := range registry {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// anyImage accepts classification inputs of any (C, H, W) or flat shape.
func anyImage(_ Config, in Input) error {
	if in.YLen != 1 {
		return fmt.Errorf("needs one label per example (a classification data set), got %d", in.YLen)
	}
	if len(in.Shape) == 0 || in.Classes < 2 {
		return fmt.Errorf("needs an example shape and at least 2 classes, got shape %v, %d classes", in.Shape, in.Classes)
	}
	return nil
}

// image3D accepts classification inputs shaped (C, H, W).
func image3D(c Config, in Input) error {
	if err := anyImage(c, in); err != nil {
		return err
	}
	if len(in.Shape) != 3 {
		return fmt.Errorf("needs images shaped (C, H, W), got %v", in.Shape)
	}
	return nil
}
