package data_test

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/gradwire/gradwire/data"
	"github.com/gradwire/gradwire/internal/datatest"
)

func TestInfo(t *testing.T) {
	if got, want := data.Names(), []string{"fashion-mnist", "mnist", "cifar10", "cifar100", "tinyshakespeare"}; !slices.Equal(got, want) {
		t.Errorf("Names() = %v, want %v", got, want)
	}
	for _, tc := range []struct {
		name    string
		shape   []int
		classes int
		files   int
	}{
		{"fashion-mnist", []int{1, 28, 28}, 10, 4},
		{"mnist", []int{1, 28, 28}, 10, 4},
		{"cifar10", []int{3, 32, 32}, 10, 6},
		{"cifar100", []int{3, 32, 32}, 100, 2},
		{"tinyshakespeare", nil, 65, 1},
	} {
		info, err := data.Lookup(tc.name)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(info.Shape, tc.shape) || info.Classes != tc.classes || len(info.Files) != tc.files {
			t.Errorf("%s: shape %v classes %d files %v", tc.name, info.Shape, info.Classes, info.Files)
		}
		info.Files[0] = "changed"
		if again, _ := data.Lookup(tc.name); again.Files[0] == "changed" {
			t.Errorf("%s: Lookup shares its slices with the caller", tc.name)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	for _, tc := range []struct {
		opts  data.Options
		split string
		want  string
	}{
		{data.Options{Name: "mnist"}, "validation", `unknown split "validation"`},
		{data.Options{Name: "cifar10", Coarse: true}, "train", "coarse labels exist only for cifar100"},
	} {
		if _, err := data.Open(tc.opts, tc.split); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%+v, %q): error %v, want %q", tc.opts, tc.split, err, tc.want)
		}
	}
}

// labelHistogram fills the whole data set in batches and counts the labels; it also
// returns the mean and standard deviation of all x values.
func labelHistogram(ds data.Dataset) (hist []int, mean, std float64) {
	const batch = 1000
	size := 1
	for _, d := range ds.XShape() {
		size *= d
	}
	hist = make([]int, ds.Classes())
	x := make([]float32, batch*size)
	y := make([]int32, batch*ds.YLen())
	idx := make([]int, 0, batch)
	var sum, sumSq float64
	for start := 0; start < ds.Len(); start += batch {
		idx = idx[:0]
		for i := start; i < min(start+batch, ds.Len()); i++ {
			idx = append(idx, i)
		}
		ds.Fill(idx, x, y)
		for _, l := range y[:len(idx)*ds.YLen()] {
			hist[l]++
		}
		for _, v := range x[:len(idx)*size] {
			sum += float64(v)
			sumSq += float64(v) * float64(v)
		}
	}
	n := float64(ds.Len() * size)
	mean = sum / n
	return hist, mean, math.Sqrt(sumSq/n - mean*mean)
}

func TestFashionMNIST(t *testing.T) {
	dir := datatest.Dir(t, "fashion-mnist")
	train, err := data.Open(data.Options{Name: "fashion-mnist", Dir: dir, Normalize: true}, "train")
	if err != nil {
		t.Fatal(err)
	}
	if train.Len() != 60000 || train.Classes() != 10 || !slices.Equal(train.XShape(), []int{1, 28, 28}) {
		t.Fatalf("train: len %d classes %d shape %v", train.Len(), train.Classes(), train.XShape())
	}
	hist, mean, std := labelHistogram(train)
	for c, n := range hist {
		if n != 6000 {
			t.Errorf("class %d has %d training examples, want 6000", c, n)
		}
	}
	// The published constants normalise the training set to mean 0, std 1.
	if math.Abs(mean) > 0.001 || math.Abs(std-1) > 0.001 {
		t.Errorf("normalised training pixels: mean %.4f std %.4f, want 0 and 1", mean, std)
	}
	test, err := data.Open(data.Options{Name: "fashion-mnist", Dir: dir}, "test")
	if err != nil {
		t.Fatal(err)
	}
	if test.Len() != 10000 {
		t.Errorf("test: %d examples, want 10000", test.Len())
	}
}

func TestMNIST(t *testing.T) {
	dir := datatest.Dir(t, "mnist")
	test, err := data.Open(data.Options{Name: "mnist", Dir: dir, Normalize: true}, "test")
	if err != nil {
		t.Fatal(err)
	}
	if test.Len() != 10000 || test.Classes() != 10 {
		t.Fatalf("test: len %d classes %d, want 10000 and 10", test.Len(), test.Classes())
	}
	hist, mean, std := labelHistogram(test)
	// The MNIST test set's published class counts.
	if want := []int{980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009}; !slices.Equal(hist, want) {
		t.Errorf("label histogram %v, want %v", hist, want)
	}
	// The constants come from the training set; the test set is close to it.
	if math.Abs(mean) > 0.02 || math.Abs(std-1) > 0.02 {
		t.Errorf("normalised test pixels: mean %.4f std %.4f, want about 0 and 1", mean, std)
	}
}

func TestTinyShakespeare(t *testing.T) {
	dir := datatest.Dir(t, "tinyshakespeare")
	train, err := data.Open(data.Options{Name: "tinyshakespeare", Dir: dir, SeqLen: 1}, "train")
	if err != nil {
		t.Fatal(err)
	}
	val, err := data.Open(data.Options{Name: "tinyshakespeare", Dir: dir, SeqLen: 1}, "val")
	if err != nil {
		t.Fatal(err)
	}
	// With windows of 1, a split of n characters has n-1 examples.
	if chars := train.Len() + 1 + val.Len() + 1; chars != 1115394 {
		t.Errorf("%d characters, want 1115394", chars)
	}
	if train.Len()+1 != 1115394*9/10 {
		t.Errorf("train split has %d characters, want 90%%: %d", train.Len()+1, 1115394*9/10)
	}
	if train.Classes() != 65 || val.Classes() != 65 {
		t.Errorf("vocabulary sizes %d and %d, want 65", train.Classes(), val.Classes())
	}

	text, err := data.Open(data.Options{Name: "tinyshakespeare", Dir: dir, SeqLen: 13}, "train")
	if err != nil {
		t.Fatal(err)
	}
	x := make([]float32, 13)
	text.Fill([]int{0}, x, make([]int32, 13))
	vocab := text.(*data.Text).Vocab()
	var b strings.Builder
	for _, id := range x {
		b.WriteByte(vocab[int(id)])
	}
	if b.String() != "First Citizen" {
		t.Errorf("first window decodes to %q, want %q", b.String(), "First Citizen")
	}
}
