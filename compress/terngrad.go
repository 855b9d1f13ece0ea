package compress

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/gradwire/gradwire/dist"
)

// ternGrad is TernGrad (Wen et al. 2017, "TernGrad: Ternary Gradients to
// Reduce Communication in Distributed Deep Learning", NIPS; the authors'
// TensorFlow code is wenwei202/terngrad). Each compressed tensor g of d
// elements (one layer: the paper's layer-wise ternarizing) is, per worker and
// step:
//
//	clip   sigma = sqrt(mean((g - mean(g))^2))   population std about the mean
//	       g_k  = clamp(g_k, -c*sigma, +c*sigma) symmetric about 0
//	scale  s    = max_k |g_k|                    the paper's ||g||_inf, after clipping
//	round  b_k  = [u_k < |g_k| / s], u_k ~ U[0,1)   (the code: U[0,s) < |g_k|)
//	code   t_k  = sign(g_k) * b_k  in {-1, 0, +1}
//	decode s * t_k, so E[s t_k] = g_k: unbiased for the clipped gradient,
//	       Var = s|g_k| - g_k^2
//
// and the exchange averages the N workers' s_i * t_i. c is
// compress.terngrad.clip_c, 2.5 by default (the README of wenwei202/terngrad,
// and clip_gradients' default there; c = 0 turns clipping off). There is no
// error feedback: neither the paper nor the authors' code keeps a residual.
//
// Choices, against ALGORITHMS-COMPRESSORS2.md's TernGrad section:
//   - Scaler sharing is off: every payload carries its worker's own s_i, and
//     the payloads are all-gathered (GRACE's terngrad does the same). The paper
//     shares s = max_i s_i so that a parameter server can sum integer codes and
//     send the aggregate back in few bits; here every worker receives every
//     payload anyway, dist has no integer all-reduce (a float32 all-reduce of
//     the codes costs 4 bytes an element, against 2 bits), sharing would cost
//     an extra round, and s_i <= max_i s_i gives each worker the smaller
//     variance s_i|g_k| - g_k^2. The mean stays unbiased.
//   - The local scale is max|clip(g)| (the paper), not the authors' multi-GPU
//     variant c*sigma; the two agree whenever clipping bites.
//   - A tensor whose sigma is 0 (all elements equal) is not clipped: the
//     authors' clamp to [-0, 0] would drop it entirely.
//   - Which tensors stay float (the code's size_to_binarize, the logits layer)
//     is the exchange's layer policy (compress.min_size, 1-D tensors dense).
//
// The uniform draws come from a PCG seeded by (seed, worker, step, tensor),
// one draw per element in order, so a run and its resume round alike.
//
// Payload, per tensor in layout order: ceil(d/4) bytes of codes (the authors'
// encoder: t+1 in {0, 1, 2}, element i in bits 2(i%4)..2(i%4)+1 of byte i/4,
// padding bits 0), then s as float32. Code 3 is rejected.
type ternGrad struct {
	tensors []Tensor
	clipC   float64
	seed    uint64
	worker  uint64
	wire    int
	tw      []int64 // bytes per tensor
	enc     Encoder
	codes   []byte
	pcg     rand.PCG
	rng     *rand.Rand
	scale   [1]float32
}

func newTernGrad(cfg Config, tensors []Tensor, worker, _ int, seed int64, _ Hyper) (Compressor, error) {
	if c := cfg.TernGrad.ClipC; !(c >= 0) || math.IsInf(c, 0) {
		return nil, fmt.Errorf("terngrad: clip_c %v, want a finite number >= 0", c)
	}
	c := &ternGrad{tensors: tensors, clipC: cfg.TernGrad.ClipC, seed: uint64(seed), worker: uint64(worker)}
	c.rng = rand.New(&c.pcg)
	for _, t := range tensors {
		n := ternBytes(t.Size) + 4
		c.tw = append(c.tw, int64(n))
		c.wire += n
		c.codes = make([]byte, max(len(c.codes), ternBytes(t.Size)))
	}
	return c, nil
}

// ternBytes is the size of d packed 2-bit codes.
func ternBytes(d int) int { return (d + 3) / 4 }

func (c *ternGrad) Needs() Needs { return Needs{Collective: dist.OpAllGather, Rounds: 1} }

func (c *ternGrad) Encode(_ int, grad []float32, _ Combined, info StepInfo) (Payload, error) {
	c.enc.Reset()
	for ti, t := range c.tensors {
		g := grad[t.Offset : t.Offset+t.Size]
		ternClip(g, c.clipC)
		var s float32
		for _, v := range g {
			s = max(s, abs32(v))
		}
		codes := c.codes[:ternBytes(t.Size)]
		clear(codes)
		c.pcg.Seed(dgcMix(c.seed, c.worker), dgcMix(uint64(info.Step), uint64(ti)))
		for i, v := range g {
			// 1, or when rounded up 2 for v > 0 and 0 otherwise; without
			// branches, which the coin flips would mispredict.
			up := b2u(ternRound(c.rng.Float64(), float64(abs32(v))/float64(s)))
			code := byte(1 + 2*up*b2u(v > 0) - up)
			codes[i>>2] |= code << (2 * (i & 3))
		}
		c.scale[0] = s
		c.enc.Raw(codes)
		c.enc.Float32s(c.scale[:])
	}
	return Payload{Bytes: c.enc.Bytes(), Wire: int64(c.enc.Len()), TensorWire: c.tw}, nil
}

// ternRound is the stochastic rounding: 1 with probability p = |g_k|/s. A zero
// tensor has p = 0/0 = NaN, which never rounds up.
func ternRound(u, p float64) bool { return u < p }

// ternClip clamps g in place to [-c*sigma, c*sigma] (sigma: g's population
// standard deviation). c = 0 or sigma = 0 leaves g as it is.
func ternClip(g []float32, c float64) {
	if c == 0 || len(g) == 0 {
		return
	}
	var mean, ss float64
	for _, v := range g {
		mean += float64(v)
	}
	mean /= float64(len(g))
	for _, v := range g {
		ss += (float64(v) - mean) * (float64(v) - mean)
	}
	bound := c * math.Sqrt(ss/float64(len(g)))
	if bound == 0 {
		return
	}
	hi := float32(bound)
	for i, v := range g {
		g[i] = min(max(v, -hi), hi)
	}
}

// statelessDecode: DecodeAdd writes only dst and the scale, scratch that Encode
// rewrites, so a worker that does not keep the mean skips it.
func (c *ternGrad) statelessDecode() {}

// DecodeAdd adds one worker's s * t.
func (c *ternGrad) DecodeAdd(p Payload, dst []float32, _ StepInfo) error {
	if err := checkSize(p, c.wire); err != nil {
		return err
	}
	d := NewDecoder(p.Bytes) // the length was checked: the reads cannot run short
	for _, t := range c.tensors {
		codes := d.Raw(ternBytes(t.Size))
		d.Float32s(c.scale[:])
		s := c.scale[0]
		if !(s >= 0) || math.IsInf(float64(s), 0) {
			return fmt.Errorf("tensor %s: scale %v, want a finite number >= 0", t.Name, s)
		}
		for i := range t.Size {
			code := codes[i>>2] >> (2 * (i & 3)) & 3
			if code == 3 {
				return fmt.Errorf("tensor %s: element %d has code 3, want 0, 1 or 2", t.Name, i)
			}
			if code != 1 {
				dst[t.Offset+i] += s * float32(int(code)-1)
			}
		}
	}
	return nil
}

func (c *ternGrad) Steady(StepInfo) bool                   { return true }
func (c *ternGrad) State() map[string][]float32            { return nil }
func (c *ternGrad) SetState(st map[string][]float32) error { return noState("terngrad", st) }
