package models

// FLOP accounting for throughput figures: a layer adds the multiply-adds of
// its matrix products (convolution, linear, LSTM gates) as it is built, two
// FLOPs each. Element-wise work (activations, BatchNorm, pooling) is left out,
// as is the embedding lookup, the usual convention for model FLOPs.

// addProductFLOPs records a product of an (m, k) by a (k, n) matrix.
func (b *builder) addProductFLOPs(m, k, n int) {
	b.flops += 2 * int64(m) * int64(k) * int64(n)
}

// TrainFLOPs is the FLOPs of one training step at Batch: the forward products
// and the two backward products per forward one (input and weight
// gradients), 3x the forward count. The first convolution's skipped input
// gradient is not subtracted: the figure is a property of the model, the same
// for every implementation.
func (n *Net) TrainFLOPs() int64 { return 3 * n.train.b.flops }
