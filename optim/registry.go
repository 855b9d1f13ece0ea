package optim

import (
	"fmt"
	"github.com/gradwire/gradwire/internal/problem"
	"maps"
	"math"
	"slices"
	"strings"
)

// Registry maps each optimizer name (Config.Name) to its constructor. Every
// constructor validates the fields it uses and returns a *FieldError naming the key;
// Names, Config.Problems and the run config's checks all follow this map, so a new
// optimizer is one file and one line here.
var Registry = map[string]func(Config) (Optimizer, error){
	"sgd":      asOptimizer(NewSGD),
	"sgdw":     asOptimizer(NewSGDW),
	"adam":     asOptimizer(NewAdam),
	"adamw":    asOptimizer(NewAdamW),
	"lars":     asOptimizer(NewLARS),
	"lamb":     asOptimizer(NewLAMB),
	"novograd": asOptimizer(NewNovoGrad),
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
		return nil, &FieldError{Key: "optim.name", Value: c.Name, Want: "must be one of " + strings.Join(Names(), ", ")}
	}
	return f(c)
}

// Names returns the registered optimizer names, sorted.
func Names() []string { return slices.Sorted(maps.Keys(Registry)) }

// Validate reports every problem of Problems at once, one per line, or nil.
func (c Config) Validate() error { return problem.Join(c.Problems()) }

// defaults holds, per optimizer, the values ApplyDefaults puts into the fields below
// when they are zero: the defaults of each optimizer's paper or reference code.
var defaults = map[string]Config{
	"adam":     {Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}, // torch.optim.Adam
	"adamw":    {Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}, // torch.optim.AdamW
	"lars":     {LARSEta: defaultLARSEta},             // You et al. 2017, TF TPU LARSOptimizer
	"lamb":     {Beta1: 0.9, Beta2: 0.999, Eps: 1e-6}, // apex FusedLAMB
	"novograd": {Beta1: 0.95, Beta2: 0.98, Eps: 1e-8}, // OpenSeq2Seq NovoGrad2
}

// ApplyDefaults fills the fields the named optimizer uses and c leaves at zero with
// that optimizer's own defaults (Beta1, Beta2, Eps, LARSEta):
//
//	adam, adamw: beta1 0.9, beta2 0.999, eps 1e-8 (PyTorch)
//	lamb:        beta1 0.9, beta2 0.999, eps 1e-6 (apex FusedLAMB)
//	novograd:    beta1 0.95, beta2 0.98, eps 1e-8 (OpenSeq2Seq NovoGrad2)
//	lars:        lars_eta 0.001 (You et al. 2017)
//
// Optimizers that do not use a field keep its zero, so a resolved SGD config shows no
// Adam settings. Zero means "unset" here, so beta1 = 0 cannot be requested through a
// config file. The per-optimizer defaults apply only to zeros: a run config that
// writes a global default for beta1, beta2 or eps (as configs.Default does) gives
// that value to every optimizer, so set them explicitly for LAMB and NovoGrad.
//
// Fields whose zero is a valid setting keep it: Momentum (SGD without momentum),
// WeightDecay, LAMBMaxGradNorm (0 = no clipping) and the booleans. The weight decay
// and momentum of LARS, LAMB and NovoGrad therefore come from the config section's
// own defaults, not from the papers' (LARS 1e-4 and 0.9, LAMB 0.01, NovoGrad 0).
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
	if c.LARSEta == 0 {
		c.LARSEta = d.LARSEta
	}
}

// validateMoments checks Beta1, Beta2 and Eps for the optimizers that keep Adam-like
// moments (adam, adamw, lamb, novograd), named by who.
func (c Config) validateMoments(who string) error {
	if !(c.Beta1 >= 0 && c.Beta1 < 1) {
		return &FieldError{Key: "optim.beta1", Value: c.Beta1, Want: "must be in [0, 1)"}
	}
	if !(c.Beta2 >= 0 && c.Beta2 < 1) {
		return &FieldError{Key: "optim.beta2", Value: c.Beta2, Want: "must be in [0, 1)"}
	}
	if !(c.Eps > 0) || math.IsInf(c.Eps, 0) {
		return &FieldError{Key: "optim.eps", Value: c.Eps, Want: fmt.Sprintf("must be a positive number (%s's default is %g)", who, defaults[who].Eps)}
	}
	return nil
}

// validateCommon checks the fields every optimizer uses.
func (c Config) validateCommon() error {
	if !finite(c.LR) || c.LR <= 0 {
		return &FieldError{Key: "optim.lr", Value: c.LR, Want: "must be a positive number"}
	}
	if !finite(c.WeightDecay) || c.WeightDecay < 0 {
		return &FieldError{Key: "optim.weight_decay", Value: c.WeightDecay, Want: "must be a non-negative number"}
	}
	if !finite(c.ClipNorm) || c.ClipNorm < 0 {
		return &FieldError{Key: "optim.clip_norm", Value: c.ClipNorm, Want: "must be a non-negative number (0 turns clipping off)"}
	}
	return nil
}

// FieldError is an invalid configuration value: the key, the value and what is
// expected. It is the problem type every config section reports.
type FieldError = problem.Problem

func finite(x float64) bool { return problem.Finite(x) }

// validateMomentum checks Momentum and Nesterov for the optimizers with heavy-ball
// momentum (sgd, lars).
func (c Config) validateMomentum() error {
	if !(c.Momentum >= 0 && c.Momentum < 1) {
		return &FieldError{Key: "optim.momentum", Value: c.Momentum, Want: "must be in [0, 1)"}
	}
	if c.Nesterov && c.Momentum == 0 {
		return &FieldError{Key: "optim.nesterov", Value: true, Want: "needs optim.momentum > 0"}
	}
	return nil
}
