package compress

import (
	"fmt"

	"github.com/gradwire/gradwire/optim"
)

// FitOptimizer configures opt for what compressor c does to the tensors it
// compresses, once when both are built: a compressor that applies momentum
// and weight decay itself (DGC's momentum correction) needs plain SGD steps
// there, and no other optimizer (any other rule would apply momentum twice);
// one that applies momentum but leaves weight decay to the optimizer
// (compress.dgc.weight_decay_at optimizer) needs SGD's DecaySteps there. name
// is compress.name, for the error. A nil c leaves opt as it is.
func FitOptimizer(opt optim.Optimizer, c Compressor, tensors []Tensor, name, optimName string) error {
	if c == nil || !c.Needs().OwnsMomentum {
		return nil
	}
	sgd, ok := opt.(*optim.SGD)
	if !ok {
		return fmt.Errorf("compress.name %s applies momentum itself (momentum correction): optim.name must be sgd, not %s (or set compress.%s.momentum_correction: false)",
			name, optimName, name)
	}
	for _, t := range tensors {
		if c.Needs().DecayAtOptimizer {
			sgd.DecaySteps(t.Name)
		} else {
			sgd.PlainSteps(t.Name)
		}
	}
	return nil
}
