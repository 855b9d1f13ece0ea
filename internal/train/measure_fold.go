package train

import (
	"fmt"
	"math"
	"strings"

	"github.com/gradwire/gradwire/models"
	"github.com/gradwire/gradwire/optim"
)

// BatchNorm folding for the norm-based measures and the PAC-Bayes sigmas.
// The measures paper's code (Jiang et al. 2020; Dziugaite et al. 2020's
// robust-generalization-measures, both after Neyshabur et al.'s
// generalization-bounds `reparam`) first rewrites a network with BatchNorm
// as the same function without it: each BatchNorm in evaluation mode,
// y = gamma (x - mu) / sqrt(var + eps) + beta, is folded into the
// convolution or linear layer it follows,
//
//	W'_o = s_o W_o,  b'_o = beta_o - s_o mu_o,  s_o = gamma_o / sqrt(var_o + eps),
//
// and the BatchNorm is left as the identity. Weight norms, distances to the
// initialisation (the initial network folded with its own statistics), the
// path norm and the PAC-Bayes noise are then taken on W' and b'. gradwire's
// convolutions have no bias, so b' stays in the BatchNorm's shift, with
// scale 1, running mean 0 and running variance 1 - eps: the identity
// exactly (the reference sets the variance to 1, a factor 1/sqrt(1 + eps)
// per layer, and keeps a zero BatchNorm bias beside the folded conv bias,
// which its PAC-Bayes search perturbs as well).
type bnFold struct {
	weight       int // index in params of the weight the BatchNorm follows
	scale, shift int // indices in params
	mean, vari   int // indices in the buffers
}

// findFolds pairs each BatchNorm (a NAME.scale and NAME.shift parameter with
// NAME.running_mean and NAME.running_var buffers) with the weight tensor
// right before it in the parameter order, which must be a convolution with
// one output channel per BatchNorm channel. It refuses a BatchNorm it cannot pair.
func findFolds(params []optim.Param, bufs []models.Buffer) ([]bnFold, error) {
	bufAt := map[string]int{}
	for i, b := range bufs {
		bufAt[b.Name] = i
	}
	var folds []bnFold
	for i, p := range params {
		name, ok := strings.CutSuffix(p.Name, ".scale")
		if !ok || p.Kind != "norm" {
			continue
		}
		ch := len(p.Value)
		f := bnFold{weight: i - 1, scale: i, shift: i + 1}
		mean, okm := bufAt[name+".running_mean"]
		vari, okv := bufAt[name+".running_var"]
		switch {
		case i+1 >= len(params) || params[i+1].Name != name+".shift" || len(params[i+1].Value) != ch:
			return nil, fmt.Errorf("batchnorm %s: no shift of %d channels right after its scale", name, ch)
		case !okm || !okv || len(bufs[mean].Value) != ch || len(bufs[vari].Value) != ch:
			return nil, fmt.Errorf("batchnorm %s: no running statistics of %d channels", name, ch)
		case i == 0 || params[i-1].Kind != "conv" || params[i-1].Shape[0] != ch:
			return nil, fmt.Errorf("batchnorm %s: the parameter before it is not a convolution with %d output channels", name, ch)
		}
		f.mean, f.vari = mean, vari
		folds = append(folds, f)
	}
	return folds, nil
}

// foldBatchNorms returns copies of the flat parameters w (laid out as
// params) and of the buffers with every BatchNorm of folds folded into the
// weight before it.
func foldBatchNorms(params []optim.Param, folds []bnFold, w []float32, bufs [][]float32, eps float64) ([]float32, [][]float32) {
	off := make([]int, len(params)+1)
	for i, p := range params {
		off[i+1] = off[i] + len(p.Value)
	}
	wf := append([]float32(nil), w...)
	bf := make([][]float32, len(bufs))
	for i, b := range bufs {
		bf[i] = append([]float32(nil), b...)
	}
	for _, f := range folds {
		gamma, beta := w[off[f.scale]:off[f.scale+1]], w[off[f.shift]:off[f.shift+1]]
		weight := wf[off[f.weight]:off[f.weight+1]]
		per := len(weight) / len(gamma)
		for o := range gamma {
			s := float64(gamma[o]) / math.Sqrt(float64(bufs[f.vari][o])+eps)
			row := weight[o*per : (o+1)*per]
			for j, v := range row {
				row[j] = float32(s * float64(v))
			}
			wf[off[f.shift]+o] = float32(float64(beta[o]) - s*float64(bufs[f.mean][o]))
			wf[off[f.scale]+o] = 1
			bf[f.mean][o] = 0
			bf[f.vari][o] = float32(1 - eps)
		}
	}
	return wf, bf
}
