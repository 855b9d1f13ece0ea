package data

import "fmt"

// openIDX reads one split of MNIST or Fashion-MNIST (IDX files) from dir.
func openIDX(info Info, dir, split string, normalize bool) (*Images, error) {
	files := info.splitFiles(split)
	imagesPath, ok := findFile(dir, files[0])
	if !ok {
		return nil, fmt.Errorf("%s: %s not found", dir, files[0])
	}
	labelsPath, ok := findFile(dir, files[1])
	if !ok {
		return nil, fmt.Errorf("%s: %s not found", dir, files[1])
	}
	im, err := readIDXImages(imagesPath)
	if err != nil {
		return nil, err
	}
	labels, err := readIDXLabels(labelsPath)
	if err != nil {
		return nil, err
	}
	if len(labels) != im.n {
		return nil, fmt.Errorf("%s has %d images but %s has %d labels", imagesPath, im.n, labelsPath, len(labels))
	}
	for i, l := range labels {
		if int(l) >= info.Classes {
			return nil, fmt.Errorf("%s: label %d of example %d out of range [0, %d)", labelsPath, l, i, info.Classes)
		}
	}
	return newImages(info.Name, []int{1, im.rows, im.cols}, info.Classes, im.pix, labels, info.Mean, info.Std, normalize), nil
}
