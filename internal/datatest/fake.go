package datatest

import (
	"compress/gzip"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// WriteFakeFashion writes a small data set in the Fashion-MNIST IDX format: each
// class is a bright horizontal band at its own height plus noise, so a model can
// learn it in a few steps. It is for tests that must run without the real data.
func WriteFakeFashion(t *testing.T, root string, nTrain, nTest int) {
	t.Helper()
	dir := filepath.Join(root, "fashion-mnist")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(9, 9))
	write := func(name string, header []uint32, body []byte) {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		zw := gzip.NewWriter(f)
		for _, h := range header {
			binary.Write(zw, binary.BigEndian, h)
		}
		zw.Write(body)
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	split := func(prefix string, n int) {
		imgs := make([]byte, n*28*28)
		labels := make([]byte, n)
		for i := range labels {
			c := rng.IntN(10)
			labels[i] = byte(c)
			img := imgs[i*784 : (i+1)*784]
			for p := range img {
				img[p] = byte(rng.IntN(60))
			}
			for p := (2 + 2*c) * 28; p < (4+2*c)*28; p++ {
				img[p] = 200
			}
		}
		write(prefix+"-images-idx3-ubyte.gz", []uint32{0x803, uint32(n), 28, 28}, imgs)
		write(prefix+"-labels-idx1-ubyte.gz", []uint32{0x801, uint32(n)}, labels)
	}
	split("train", nTrain)
	split("t10k", nTest)
}
