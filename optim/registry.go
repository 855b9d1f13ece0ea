package optim

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Registry maps each optimizer name (Config.Name) to its constructor. Every
// constructor validates the fields it uses and returns a *FieldError naming the key.
var Registry = map[string]func(Config) (Optimizer, error){
	"sgd":   asOptimizer(NewSGD),
	"adam":  asOptimizer(NewAdam),
	"adamw": asOptimizer(NewAdamW),
}

// asOptimizer adapts a typed constructor to the Registry signature; it returns a nil
// interface on error, not an interface holding a nil pointer.
func asOptimizer[T Optimizer](f func(Config) (T, error)) func(Config) (Optimizer, error) {
	return func(c Config) (Optimizer, error) {
		o, err := f(c)
		if err != nil {
			return nil, err
		}
		return o, nil
	}
}

// New returns the optimizer named by c.Name, configured by c. An unknown name is a
// *FieldError listing the valid names.
func New(c Config) (Optimizer, error) {
	f, ok := Registry[c.Name]
	if !ok {
		return nil, &FieldError{Key: "optim.name", Value: c.Name, Want: "one of " + strings.Join(Names(), ", ")}
	}
	return f(c)
}

// Names returns the registered optimizer names, sorted.
func Names() []string { return slices.Sorted(maps.Keys(Registry)) }

// Validate reports the first invalid field of c as a *FieldError: the name must be
// registered, and the fields the named optimizer uses must be in range. Fields the
// optimizer does not use are not checked.
func (c Config) Validate() error {
	_, err := New(c) // constructors hold the checks and allocate no buffers
	return err
}

// defaults holds, per optimizer, the values ApplyDefaults puts into Beta1, Beta2 and
// Eps when they are zero.
var defaults = map[string]Config{
	"adam":  {Beta1: 0.9, Beta2: 0.999, Eps: 1e-8},
	"adamw": {Beta1: 0.9, Beta2: 0.999, Eps: 1e-8},
}

// ApplyDefaults fills Beta1, Beta2 and Eps left at zero with the defaults of the
// named optimizer (Adam and AdamW: 0.9, 0.999, 1e-8, as PyTorch). Optimizers that do
// not use them keep zeros, so a resolved SGD config shows no Adam settings. Zero
// means "unset" here, so beta1 = 0 cannot be requested through a config file.
// Momentum keeps its zero default: SGD without momentum is a valid choice.
func (c *Config) ApplyDefaults() {
	d := defaults[c.Name]
	if c.Beta1 == 0 {
		c.Beta1 = d.Beta1
	}
	if c.Beta2 == 0 {
		c.Beta2 = d.Beta2
	}
	if c.Eps == 0 {
		c.Eps = d.Eps
	}
}

// validateCommon checks the fields every optimizer uses.
func (c Config) validateCommon() error {
	if !finite(c.LR) || c.LR <= 0 {
		return &FieldError{Key: "optim.lr", Value: c.LR, Want: "a finite number > 0"}
	}
	if !finite(c.WeightDecay) || c.WeightDecay < 0 {
		return &FieldError{Key: "optim.weight_decay", Value: c.WeightDecay, Want: "a finite number >= 0"}
	}
	if !finite(c.ClipNorm) || c.ClipNorm < 0 {
		return &FieldError{Key: "optim.clip_norm", Value: c.ClipNorm, Want: "a finite number >= 0 (0 turns clipping off)"}
	}
	return nil
}

// FieldError is an invalid configuration value.
type FieldError struct {
	Key   string // the config key, e.g. "optim.lr" or "schedule.gamma"
	Value any    // the value found
	Want  string // what is expected instead
}

// Error returns e.g. `optim.lr = -0.1: want a finite number > 0`.
func (e *FieldError) Error() string {
	v := fmt.Sprint(e.Value)
	if s, ok := e.Value.(string); ok {
		v = strconv.Quote(s)
	}
	return fmt.Sprintf("%s = %s: want %s", e.Key, v, e.Want)
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
