// Package data reads the data sets, samples global batches and finds or fetches files.
package data

// Dataset is a labelled set of examples held in memory.
type Dataset interface {
	// Name of the data set, as in the config (fashion-mnist, mnist, cifar10, cifar100, tinyshakespeare).
	Name() string
	// Len is the number of examples.
	Len() int
	// XShape is the shape of one example: (C, H, W) for images, (T) for text windows.
	XShape() []int
	// YLen is the number of labels per example: 1 for classification, T for next-character targets.
	YLen() int
	// Classes is the number of classes, or the vocabulary size for text.
	Classes() int
	// Fill copies examples idx into x (len(idx)*prod(XShape) values, normalised; token ids
	// as float32 for text) and their labels into y (len(idx)*YLen values).
	Fill(idx []int, x []float32, y []int32)
}
