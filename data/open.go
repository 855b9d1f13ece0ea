package data

import (
	"fmt"
	"slices"
	"strings"
)

// Options selects and configures a data set for Open.
type Options struct {
	Name      string // fashion-mnist, mnist, cifar10, cifar100 or tinyshakespeare
	Dir       string // the config's data.dir; may be empty (see Locate)
	SeqLen    int    // text: characters per example window (required for tinyshakespeare)
	Normalize bool   // images: per-channel (x/255 - mean)/std; otherwise x/255
	Coarse    bool   // cifar100: use the 20 coarse labels instead of the 100 fine ones
}

// Info describes a data set as published.
type Info struct {
	Name string
	// Shape is (C, H, W) of one image; nil for text, whose examples have shape [SeqLen].
	Shape []int
	// Classes is the number of classes, or for text the vocabulary size of the canonical corpus.
	Classes int
	// CoarseClasses is the number of coarse classes (cifar100 only; 0 otherwise).
	CoarseClasses int
	// Train and Test are the files each split reads. An IDX file named X.gz may also be
	// present uncompressed as X.
	Train, Test []string
	// Files is every file of the data set as Fetch leaves it in <dir>/<name>.
	Files []string
	// Mean and Std are the per-channel normalisation constants (images only).
	Mean, Std []float64
}

// The catalogue, in the order Names reports.
var catalog = []Info{
	{
		Name: "fashion-mnist", Shape: []int{1, 28, 28}, Classes: 10,
		Train: []string{"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"},
		Test:  []string{"t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"},
		Mean:  []float64{0.2860}, Std: []float64{0.3530},
	},
	{
		Name: "mnist", Shape: []int{1, 28, 28}, Classes: 10,
		Train: []string{"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"},
		Test:  []string{"t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"},
		Mean:  []float64{0.1307}, Std: []float64{0.3081},
	},
	{
		Name: "cifar10", Shape: []int{3, 32, 32}, Classes: 10,
		Train: []string{"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin", "data_batch_5.bin"},
		Test:  []string{"test_batch.bin"},
		Mean:  []float64{0.4914, 0.4822, 0.4465}, Std: []float64{0.2470, 0.2435, 0.2616},
	},
	{
		Name: "cifar100", Shape: []int{3, 32, 32}, Classes: 100, CoarseClasses: 20,
		Train: []string{"train.bin"},
		Test:  []string{"test.bin"},
		Mean:  []float64{0.5071, 0.4865, 0.4409}, Std: []float64{0.2673, 0.2564, 0.2762},
	},
	{
		Name: "tinyshakespeare", Classes: 65,
		Train: []string{"input.txt"},
		Test:  []string{"input.txt"},
	},
}

// Names lists the data sets this package knows.
func Names() []string {
	names := make([]string, len(catalog))
	for i, info := range catalog {
		names[i] = info.Name
	}
	return names
}

// Lookup returns the description of a data set; unknown names are an error that lists
// the valid ones.
func Lookup(name string) (Info, error) {
	for _, info := range catalog {
		if info.Name == name {
			// Copies, so that callers cannot change the catalogue.
			info.Shape = slices.Clone(info.Shape)
			info.Train = slices.Clone(info.Train)
			info.Test = slices.Clone(info.Test)
			info.Files = filesOf(info)
			info.Mean = slices.Clone(info.Mean)
			info.Std = slices.Clone(info.Std)
			return info, nil
		}
	}
	return Info{}, fmt.Errorf("unknown data set %q; valid names: %s", name, strings.Join(Names(), ", "))
}

// filesOf is the union of the train and test files, train first.
func filesOf(info Info) []string {
	files := slices.Clone(info.Train)
	for _, f := range info.Test {
		if !slices.Contains(files, f) {
			files = append(files, f)
		}
	}
	return files
}

// splitFiles returns the files one split needs; split must be canonical.
func (info Info) splitFiles(split string) []string {
	if split == "train" {
		return info.Train
	}
	return info.Test
}

// canonicalSplit maps the accepted split names to "train" or "test" ("val" is the
// held-out part, which for text is the last 10% of the corpus).
func canonicalSplit(split string) (string, error) {
	switch split {
	case "train":
		return "train", nil
	case "test", "val":
		return "test", nil
	}
	return "", fmt.Errorf("unknown split %q; valid splits: train, test (or val)", split)
}

// Open finds the data set (see LocateSplit) and reads one split into memory. split is
// "train" or "test"; "val" is accepted as a synonym of "test". Image data sets are
// returned as *Images, text as *Text.
func Open(opts Options, split string) (Dataset, error) {
	info, err := Lookup(opts.Name)
	if err != nil {
		return nil, err
	}
	split, err = canonicalSplit(split)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", opts.Name, err)
	}
	if opts.Coarse && info.CoarseClasses == 0 {
		return nil, fmt.Errorf("open %s: coarse labels exist only for cifar100", opts.Name)
	}
	dir, err := LocateSplit(opts.Name, opts.Dir, split)
	if err != nil {
		return nil, err
	}
	var ds Dataset
	switch info.Name {
	case "fashion-mnist", "mnist":
		ds, err = openIDX(info, dir, split, opts.Normalize)
	case "cifar10", "cifar100":
		ds, err = openCIFAR(info, dir, split, opts.Normalize, opts.Coarse)
	default:
		ds, err = openText(info, dir, split, opts.SeqLen)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s %s split: %w", opts.Name, split, err)
	}
	return ds, nil
}
