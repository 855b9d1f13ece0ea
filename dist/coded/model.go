package coded

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
)

// Models lists the linear models: logistic regression on labels y in {0, 1}
// and the linear SVM (hinge loss) on s = 2y - 1 in {-1, +1}.
var Models = []string{"logreg", "svm"}

func checkModel(model string) error {
	if model != "logreg" && model != "svm" {
		return fmt.Errorf("coded: model %q, expected logreg or svm", model)
	}
	return nil
}

// Residual is the element-wise step between the two products, the loss's
// derivative in z = X w per example (the 1/m is applied after X^T r):
// logistic sigmoid(z) - y; hinge -s 1[s z < 1].
func Residual(model string, z, y []float64) []float64 {
	r := make([]float64, len(z))
	for i := range z {
		if model == "logreg" {
			r[i] = sigmoid(z[i]) - y[i]
			continue
		}
		if s := 2*y[i] - 1; s*z[i] < 1 {
			r[i] = -s
		}
	}
	return r
}

func sigmoid(z float64) float64 {
	if z >= 0 {
		return 1 / (1 + math.Exp(-z))
	}
	e := math.Exp(z) // no overflow for very negative z
	return e / (1 + e)
}

// Loss is the regularised mean loss, logistic log(1 + e^z) - y z or hinge
// max(0, 1 - s z), plus lambda/2 ||w||^2.
func Loss(model string, X *mat.Dense, y []float64, w *mat.VecDense, lambda float64) float64 {
	var z mat.VecDense
	z.MulVec(X, w)
	var l float64
	for i := range y {
		zi := z.AtVec(i)
		if model == "logreg" {
			l += math.Max(zi, 0) + math.Log1p(math.Exp(-math.Abs(zi))) - y[i]*zi
		} else {
			l += math.Max(0, 1-(2*y[i]-1)*zi)
		}
	}
	return l/float64(len(y)) + lambda/2*mat.Dot(w, w)
}

// Gradient is the loss's gradient computed directly on one machine,
// X^T r(X w, y) / m + lambda w: the reference the coded steps must match.
func Gradient(model string, X *mat.Dense, y []float64, w *mat.VecDense, lambda float64) *mat.VecDense {
	var z mat.VecDense
	z.MulVec(X, w)
	r := mat.NewVecDense(len(y), Residual(model, z.RawVector().Data, y))
	var g mat.VecDense
	g.MulVec(X.T(), r)
	g.ScaleVec(1/float64(len(y)), &g)
	g.AddScaledVec(&g, lambda, w)
	return &g
}

// Accuracy is the fraction of examples on the side of x.w = 0 their label
// says (label 1 on the positive side).
func Accuracy(X *mat.Dense, y []float64, w *mat.VecDense) float64 {
	var z mat.VecDense
	z.MulVec(X, w)
	var ok int
	for i := range y {
		if (z.AtVec(i) > 0) == (y[i] > 0.5) {
			ok++
		}
	}
	return float64(ok) / float64(len(y))
}
