package data

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"slices"
)

// augmentStream separates the augmentation's random numbers from the sampler's, which
// use the same seed.
const augmentStream = 0x6175676d656e7421 // "augment!"

// Augmenter applies the CIFAR training augmentation: a random crop of the image padded
// by Pad pixels on each side, then a horizontal flip with probability 1/2. The choices
// for an example depend only on (seed, epoch, example index), so results do not depend
// on how a global batch is split among workers or in which order workers run. An
// Augmenter is safe for concurrent use.
type Augmenter struct {
	seed    uint64
	c, h, w int
	pad     int
	flip    bool
	fill    []float32
}

// NewCIFARAugmenter returns an augmenter for examples of shape (C, H, W). pad is the
// padding on each side (4 for CIFAR); flip enables the horizontal flip; fill holds, per
// channel, the value padded pixels get: the normalised value of a black pixel, which
// (*Images).PadFill returns.
func NewCIFARAugmenter(seed int64, shape []int, pad int, flip bool, fill []float32) (*Augmenter, error) {
	if len(shape) != 3 || shape[0] < 1 || shape[1] < 1 || shape[2] < 1 {
		return nil, fmt.Errorf("augment: shape %v, expected (C, H, W) with positive sizes", shape)
	}
	if pad < 0 {
		return nil, fmt.Errorf("augment: padding %d, expected >= 0", pad)
	}
	if len(fill) != shape[0] {
		return nil, fmt.Errorf("augment: %d fill values for %d channels", len(fill), shape[0])
	}
	return &Augmenter{seed: uint64(seed), c: shape[0], h: shape[1], w: shape[2], pad: pad, flip: flip, fill: slices.Clone(fill)}, nil
}

// Apply augments, in place, a batch filled by Dataset.Fill: x starts with len(idx)
// examples of C*H*W values, idx are their example indices (which, with epoch, choose the
// crop and flip). Like Fill, it panics when x is too short.
func (a *Augmenter) Apply(x []float32, idx []int, epoch int) {
	size := a.c * a.h * a.w
	if len(x) < len(idx)*size {
		panic(fmt.Sprintf("data: Augmenter.Apply of %d examples needs %d values, got %d", len(idx), len(idx)*size, len(x)))
	}
	for i, j := range idx {
		dy, dx, flip := a.choices(j, epoch)
		a.transform(x[i*size:(i+1)*size], dy, dx, flip)
	}
}

// choices returns the crop's top-left corner in the padded image (0..2*pad each) and
// whether to flip, drawn from a PCG seeded by (seed, epoch, index) alone.
func (a *Augmenter) choices(index, epoch int) (dy, dx int, flip bool) {
	var src rand.PCG // a value, so that Apply does not allocate
	src.Seed(a.seed^augmentStream, uint64(epoch)<<32^uint64(index))
	r := src.Uint64()
	// Each choice takes its own 21 bits; the multiply-shift maps them onto 0..span-1.
	span := uint64(2*a.pad + 1)
	hi, _ := bits.Mul64(r<<43, span)
	dy = int(hi)
	hi, _ = bits.Mul64(r>>21<<43, span)
	dx = int(hi)
	flip = a.flip && r>>63 == 1
	return dy, dx, flip
}

// transform crops one CHW example in place: output pixel (y, x) takes the input pixel
// (y+dy-pad, x+dx-pad), or the channel's fill value outside the image; then it mirrors
// the rows when flip is set.
func (a *Augmenter) transform(img []float32, dy, dx int, flip bool) {
	oy, ox := dy-a.pad, dx-a.pad
	w := a.w
	// Destination columns [x0, x1) have their source inside the row.
	x0, x1 := max(0, -ox), min(w, w-ox)
	plane := a.h * w
	for c := range a.c {
		p := img[c*plane : (c+1)*plane]
		fill := a.fill[c]
		row := func(y int) {
			dst := p[y*w : (y+1)*w]
			sy := y + oy
			if sy < 0 || sy >= a.h || x0 >= x1 {
				for x := range dst {
					dst[x] = fill
				}
				return
			}
			// copy handles the overlap when oy == 0; the edges are filled after it
			// because they may be part of the source.
			copy(dst[x0:x1], p[sy*w+x0+ox:sy*w+x1+ox])
			for x := 0; x < x0; x++ {
				dst[x] = fill
			}
			for x := x1; x < w; x++ {
				dst[x] = fill
			}
		}
		// Rows are read from oy rows away: walking towards the source (forward when
		// oy >= 0) reads each row before it is overwritten, so no scratch buffer is needed.
		if oy >= 0 {
			for y := range a.h {
				row(y)
			}
		} else {
			for y := a.h - 1; y >= 0; y-- {
				row(y)
			}
		}
		if flip {
			for y := range a.h {
				slices.Reverse(p[y*w : (y+1)*w])
			}
		}
	}
}
