package data

import (
	"fmt"
	"slices"
	"strconv"
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
// returned as *Images, text as *Text. When the other split is present too, a split
// whose images differ from it in shape is refused here, not during training; use
// OpenTrainTest to open both splits with every check.
func Open(opts Options, split string) (Dataset, error) {
	info, err := checkOptions(opts)
	if err != nil {
		return nil, err
	}
	split, err = canonicalSplit(split)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", opts.Name, err)
	}
	_, paths, err := splitPaths(info, opts.Dir, split)
	if err != nil {
		return nil, err
	}
	ds, err := openSplit(info, opts, split, paths)
	if err != nil {
		return nil, err
	}
	if err := checkOtherSplit(info, opts.Dir, split, paths, ds); err != nil {
		return nil, err
	}
	return ds, nil
}

// OpenTrainTest opens the train and the test split of a data set (see Open) and
// refuses them when they disagree in example shape or number of classes, naming both
// files: a model built for one split could not evaluate the other.
func OpenTrainTest(opts Options) (train, test Dataset, err error) {
	info, err := checkOptions(opts)
	if err != nil {
		return nil, nil, err
	}
	_, trainPaths, err := splitPaths(info, opts.Dir, "train")
	if err != nil {
		return nil, nil, err
	}
	_, testPaths, err := splitPaths(info, opts.Dir, "test")
	if err != nil {
		return nil, nil, err
	}
	if train, err = openSplit(info, opts, "train", trainPaths); err != nil {
		return nil, nil, err
	}
	if test, err = openSplit(info, opts, "test", testPaths); err != nil {
		return nil, nil, err
	}
	err = compareSplits(info.Name,
		splitShape{"train", trainPaths[0], train.XShape(), train.Classes()},
		splitShape{"test", testPaths[0], test.XShape(), test.Classes()})
	if err != nil {
		return nil, nil, err
	}
	return train, test, nil
}

// checkOptions looks the data set up and checks the options that do not depend on files.
func checkOptions(opts Options) (Info, error) {
	info, err := Lookup(opts.Name)
	if err != nil {
		return Info{}, err
	}
	if opts.Coarse && info.CoarseClasses == 0 {
		return Info{}, fmt.Errorf("open %s: coarse labels exist only for cifar100", opts.Name)
	}
	return info, nil
}

// splitPaths finds the folder holding split (see LocateSplit) and returns it with the
// path of every file the split reads, in the order of Info.Train or Info.Test.
func splitPaths(info Info, dir, split string) (folder string, paths []string, err error) {
	folder, err = LocateSplit(info.Name, dir, split)
	if err != nil {
		return "", nil, err
	}
	for _, name := range info.splitFiles(split) {
		path, ok := findFile(folder, name)
		if !ok { // removed since LocateSplit looked
			return "", nil, fmt.Errorf("open %s %s split: %s: %s not found", info.Name, split, folder, name)
		}
		paths = append(paths, path)
	}
	return folder, paths, nil
}

// openSplit decodes one split from its files (as splitPaths returns them).
func openSplit(info Info, opts Options, split string, paths []string) (Dataset, error) {
	var ds Dataset
	var err error
	switch {
	case isIDX(info):
		ds, err = openIDX(info, paths, opts.Normalize)
	case info.Name == "cifar10" || info.Name == "cifar100":
		ds, err = openCIFAR(info, paths, opts.Normalize, opts.Coarse)
	default:
		ds, err = openText(info, paths[0], split, opts.SeqLen)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s %s split: %w", info.Name, split, err)
	}
	return ds, nil
}

// isIDX reports whether a data set is stored as IDX files, the only format whose
// files say what shape their images have (CIFAR's and text's shapes follow from the
// format, the same in every split).
func isIDX(info Info) bool { return info.Name == "fashion-mnist" || info.Name == "mnist" }

// checkOtherSplit compares the image shape of an IDX split just opened with the header
// of the other split's images file, when that split is present, so that Open refuses
// a mismatched pair as OpenTrainTest does. Only the header is read; a missing or
// unreadable other split is left to its own Open to report.
func checkOtherSplit(info Info, dir, split string, paths []string, ds Dataset) error {
	if !isIDX(info) {
		return nil
	}
	other := "test"
	if split == "test" {
		other = "train"
	}
	_, otherPaths, err := splitPaths(info, dir, other)
	if err != nil {
		return nil
	}
	shape, err := idxShape(otherPaths[0])
	if err != nil {
		return nil
	}
	this := splitShape{split, paths[0], ds.XShape(), ds.Classes()}
	that := splitShape{other, otherPaths[0], shape, info.Classes}
	if split == "test" {
		this, that = that, this
	}
	return compareSplits(info.Name, this, that)
}

// splitShape is what two splits of a data set must agree on, with the file it comes from.
type splitShape struct {
	split, path string
	shape       []int
	classes     int
}

// compareSplits returns an error naming both files when the splits differ in example
// shape or number of classes.
func compareSplits(name string, a, b splitShape) error {
	if slices.Equal(a.shape, b.shape) && a.classes == b.classes {
		return nil
	}
	return fmt.Errorf("%s: the %s and %s splits disagree: %s has examples of %s in %d classes, %s has %s in %d classes; "+
		"every split of a data set must have the same example shape and classes (is one file from another data set, or resized?)",
		name, a.split, b.split, a.path, shapeString(a.shape), a.classes, b.path, shapeString(b.shape), b.classes)
}

// shapeString writes a shape as 1x28x28.
func shapeString(shape []int) string {
	parts := make([]string, len(shape))
	for i, d := range shape {
		parts[i] = strconv.Itoa(d)
	}
	return strings.Join(parts, "x")
}
