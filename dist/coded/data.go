package coded

import (
	"errors"
	"fmt"

	"gonum.org/v1/gonum/mat"

	"github.com/gradwire/gradwire/data"
)

// Pair builds the two-class problem of classes a (label 0) and b (label 1)
// from an image data set's train and test splits: pixels as loaded (the
// caller opens them unnormalised, in [0, 1]) plus a constant bias feature.
func Pair(train, test data.Dataset, a, b int) (*Problem, error) {
	if a == b || a < 0 || b < 0 || a >= train.Classes() || b >= train.Classes() {
		return nil, fmt.Errorf("coded: classes %d and %d, expected two different classes in [0, %d)", a, b, train.Classes())
	}
	X, Y, err := pairRows(train, a, b)
	if err != nil {
		return nil, fmt.Errorf("train split: %w", err)
	}
	XT, YT, err := pairRows(test, a, b)
	if err != nil {
		return nil, fmt.Errorf("test split: %w", err)
	}
	return &Problem{X: X, Y: Y, XTest: XT, YTest: YT}, nil
}

func pairRows(ds data.Dataset, a, b int) (*mat.Dense, []float64, error) {
	per := 1
	for _, s := range ds.XShape() {
		per *= s
	}
	x := make([]float32, per)
	y := make([]int32, ds.YLen())
	var rows []float64
	var labels []float64
	for i := range ds.Len() {
		ds.Fill([]int{i}, x, y)
		if int(y[0]) != a && int(y[0]) != b {
			continue
		}
		for _, v := range x {
			rows = append(rows, float64(v))
		}
		rows = append(rows, 1) // bias
		if int(y[0]) == b {
			labels = append(labels, 1)
		} else {
			labels = append(labels, 0)
		}
	}
	if len(labels) == 0 {
		return nil, nil, errNoData
	}
	return mat.NewDense(len(labels), per+1, rows), labels, nil
}

var errNoData = errors.New("coded: no examples of the two classes")
