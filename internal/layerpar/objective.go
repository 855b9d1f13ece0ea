package layerpar

// Objective is the method and penalty weight of one parallel round.
type Objective struct {
	Method     string  // MethodPenalty or MethodAL
	Rho        float64 // penalty weight rho
	UCurvature float64 // c of the u-step size 1/(rho + c)
}

// AL reports whether the objective carries multipliers.
func (o Objective) AL() bool { return o.Method == MethodAL }

// UStepSize is eta = 1/(rho + c).
func (o Objective) UStepSize() float64 { return 1 / (o.Rho + o.UCurvature) }

// StageStep runs stage k's sub-problem on one batch and leaves the gradient
// of its part of J in the stage's parameter gradients:
//
//	inner stage k < K-1:  (rho/2) mean_i ||F_k(x_i) - T_i||^2,  T = U(v_k + mu_k/rho)
//	last stage K-1:       mean_i loss(F_K(x_i), y_i)
//
// The stage computes 0.5 mean_i ||F - T||^2; StageStep scales its parameter
// gradient by rho. It returns the part's value (the inner one includes the
// constant ||mu||^2/(2 rho), which does not change any gradient).
func (o Objective) StageStep(st Stage, last bool, x, target []float32, y []int32) (float64, error) {
	v, err := st.Step(x, target, y)
	if err != nil {
		return 0, err
	}
	if last {
		return v, nil
	}
	r := float32(o.Rho)
	for _, p := range st.Params() {
		for i := range p.Grad {
			p.Grad[i] *= r
		}
	}
	return o.Rho * v, nil
}

// InputGradScale is what turns a stage's InputGrad (the gradient of its
// batch-mean Step loss) into the per-example gradient of its part of J with
// respect to its input: B for the last stage, B*rho for an inner one.
func (o Objective) InputGradScale(batch int, last bool) float32 {
	if last {
		return float32(batch)
	}
	return float32(float64(batch) * o.Rho)
}

// UStep is the u-step on one example of boundary k, in the filter's stored
// space (D the average pool, U its nearest upsampling; D U = I):
//
//	v_k <- v_k - eta [ rho (v_k - D F_k(u_{k-1})) + mu_k + D g_{k+1} ],  eta = 1/(rho + c)
//
// where g_{k+1} is the per-example gradient of stage k+1's part of J with
// respect to u_k = U v_k. With S = 1 this is a gradient step on J in u_k; in
// the stored space it is the gradient step on v_k preconditioned by the
// window sizes (U^T = S^2 D). mu is nil for the penalty method. It writes the
// new v into v and returns the squared constraint residual ||v - D F||^2
// before the step.
func (o Objective) UStep(v, df, dg, mu []float32) float64 {
	eta := float32(o.UStepSize())
	rho := float32(o.Rho)
	var res float64
	for j := range v {
		c := v[j] - df[j]
		res += float64(c) * float64(c)
		g := rho*c + dg[j]
		if mu != nil {
			g += mu[j]
		}
		v[j] -= eta * g
	}
	return res
}

// MultiplierStep is the augmented Lagrangian's multiplier update on one
// example: mu_k <- mu_k + rho (v_k - D F_k(u_{k-1})). It returns the squared
// residual after the u-step.
func (o Objective) MultiplierStep(mu, v, df []float32) float64 {
	rho := float32(o.Rho)
	var res float64
	for j := range mu {
		c := v[j] - df[j]
		res += float64(c) * float64(c)
		mu[j] += rho * c
	}
	return res
}

// Value is J from its parts as StageStep returns them (for one batch) and the
// multipliers' squared norms (per boundary, batch means): the sum of the
// parts less sum ||mu||^2/(2 rho).
func (o Objective) Value(parts []float64, muSq []float64) float64 {
	var j float64
	for _, p := range parts {
		j += p
	}
	for _, m := range muSq {
		j -= m / (2 * o.Rho)
	}
	return j
}
