package data

import "fmt"

// openIDX reads one split of MNIST or Fashion-MNIST from its IDX files: paths are the
// images file and the labels file.
func openIDX(info Info, paths []string, normalize bool) (*Images, error) {
	imagesPath, labelsPath := paths[0], paths[1]
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

// idxShape reads only the header of an IDX images file and returns the (C, H, W)
// shape of its images.
func idxShape(imagesPath string) ([]int, error) {
	dims, err := readIDXHeader(imagesPath, idxImagesMagic)
	if err != nil {
		return nil, err
	}
	return []int{1, int(dims[1]), int(dims[2])}, nil
}
