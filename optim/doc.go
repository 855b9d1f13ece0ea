// Package optim updates a model's parameters from their gradients: the
// optimizers SGD, SGDW, Adam, AdamW, LARS, LAMB and NovoGrad, global-norm
// clipping, and learning-rate schedules (constant, step, cosine, poly) with
// warm-up and linear or square-root batch scaling.
//
// It works on Param, a flat per-tensor view of a model's parameter and gradient
// buffers shared with compress and dist, and never imports Gorgonia.
//
// An optimizer is chosen by name from Registry and configured by Config, the
// `optim` section of a run config:
//
//	cfg := optim.DefaultConfig() // the section's defaults: SGD, momentum 0.9
//	cfg.Name, cfg.LR = "adam", 1e-3
//	cfg.ApplyDefaults()          // Adam's own beta1, beta2 and eps
//	opt, err := optim.New(cfg)   // cfg.Problems() lists every invalid setting
//	...
//	err = opt.Step(params, schedule.LR(step))
//
// Invalid settings are reported as FieldError values naming the key, the value
// and what is expected. Names, Config.Problems and the run config's checks all
// follow Registry, so a new optimizer is one file and one Registry line.
// State and SetState carry an optimizer's buffers through checkpoints.
package optim
