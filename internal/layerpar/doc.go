// Package layerpar is layer-parallel training of residual networks with
// auxiliary variables: the penalty and augmented-Lagrangian methods and the
// serial-parallel hybrid of
//
//	Q. Sun, H. Dong, Z. Chen, W. Dian, J. Sun, Y. Sun, Z. Li, B. Dong,
//	"A Practical Layer-Parallel Training Algorithm for Residual Networks",
//	arXiv 2009.01462 (v1: "Penalty and Augmented Lagrangian Methods for
//	Layer-parallel Training of Residual Networks").
//
// as summarised in docs/ALGORITHMS-SYSTEMS-ANALYSIS.md ("Layer-parallel ResNet
// training with auxiliary variables"). The paper's code is not public; what
// below is marked as an assumption is this package's choice where the summary
// leaves the paper's details unverified.
//
// # Objectives
//
// The network is cut into K stages z_k = F_k(z_{k-1}; theta_k) at basic-block
// boundaries (models.StageBlocks: stage k holds blocks [k*nb/K, (k+1)*nb/K),
// the stem in the first stage, pooling and classifier in the last). Each
// training example i gets a free variable u_{k,i} for every stage boundary
// k = 1..K-1 (u_0 = x). The penalty objective is
//
//	J_rho = sum_i [ loss(F_K(u_{K-1,i}), y_i) + (rho/2) sum_{k<K} ||u_{k,i} - F_k(u_{k-1,i})||^2 ]
//
// and the augmented Lagrangian adds sum_{k,i} lambda_{k,i} . (u_{k,i} - F_k(u_{k-1,i})),
// with lambda_k <- lambda_k + rho (u_k - F_k(u_{k-1})) after each round. The
// sums run over examples and over every value of a feature map (the summary's
// form); the losses a batch step minimises are the batch means (J/N).
//
// # One parallel round (one epoch)
//
//  1. theta-step, stages in parallel (goroutines in one process; one MPI
//     rank per stage): stage k runs one epoch of the run's optimizer (SGD
//     with momentum) on its sub-problem, the inner stages on
//     (rho/2) mean_i ||F_k(u_{k-1,i}) - T_i||^2 with T = u_k + lambda_k/rho
//     (equal to the J terms up to a constant; T = u_k for the penalty
//     method), the last on the loss of its logits for the labels
//     (Objective.StageStep). No communication.
//  2. While it does, stage k records for every example F_k(u_{k-1}) and
//     stage k+1 the per-example gradient g_{k+1} of its part of J with
//     respect to its input u_k, at the weights the example's batch saw
//     (assumption: the u-step reuses these instead of a second pass, so that
//     a round costs one forward-backward pass per stage).
//  3. u-step on the owner of u_k (stage k), after stage k+1 has sent g_{k+1}:
//     u_k <- u_k - eta [ rho (u_k - F_k(u_{k-1})) + lambda_k + g_{k+1} ],
//     eta = 1/(rho + c) (Objective.UStep; c = layer_parallel.u_curvature, a
//     bound on the curvature the next stage adds; all boundaries at once,
//     Jacobi order). On the package doc's scalar example, c = (1+b)^2 makes
//     the step exact; with c = 0 and u at the forward pass, the inner
//     stage's next gradient is exactly back-propagation's (rho (F - u) = g).
//  4. AL only: lambda_k <- lambda_k + rho (u_k - F_k(u_{k-1})) with the new u_k
//     and the recorded F_k (Objective.MultiplierStep).
//  5. The new u_k goes to stage k+1. rho <- min(rho * rho_growth, rho_max).
//
// The auxiliary variables start from one serial forward pass (assumption),
// the multipliers at zero.
//
// # Downsampling filter (assumption: the filter choice is unverified)
//
// The auxiliary variables are stored and sent as v_k = D u_k, D the s x s
// average pool per channel, and used as u_k = U v_k, U the nearest-neighbour
// upsampling (D U = I; Filter). In the stored space the u-step above becomes
// v_k <- v_k - eta [ rho (v_k - D F_k) + mu_k + D g_{k+1} ] (the gradient step
// on v preconditioned by the window sizes), the multipliers lambda_k = U mu_k
// live in the stored space too, and T = U(v_k + mu_k/rho). With
// layer_parallel.aux_fp16 the variables and the D g messages are half
// precision (2 bytes a value); the multipliers stay float32 on their owner.
// A round sends, per boundary, D g backward and v forward: 2 N b_k bytes, b_k
// one example's stored variable (Traffic, counted; the MPI backend moves
// them with all-gathers, which deliver each message to every rank).
//
// # Serial-parallel hybrid
//
// layer_parallel.serial_epochs of train.epochs are ordinary forward-backward
// epochs of the whole network (the run's data-parallel step over the same
// workers, with data.augment where the data set has augmentation: CIFAR
// only), in layer_parallel.cycles cycles of (parallel rounds, serial
// epochs); one cycle, the default, is the summary's schedule, parallel first
// (its 75%/25% split is an assumption). Each parallel phase restarts the
// auxiliary variables from a forward pass of the current network and the
// multipliers from zero (assumption).
//
// # BatchNorm
//
// Each stage's BatchNorm layers normalise with the statistics of the stage's
// batch (the same examples as serial training's batch, the inner stages'
// inputs being the auxiliary variables) and keep their own running
// statistics, which are copied with the parameters, by name, into the whole
// network for evaluation and the serial epochs.
//
// # Verified and not
//
// Tests reproduce the summary's scalar example (penalty gradients after the
// exact u-step at rho 1, 10, 100, 1000; the AL multipliers 0.334, 0.532, ...
// converging to 0.816), the objective values, finite differences of a real
// ResNet stage's objective, and the recovery of the serial gradient step on a
// two-stage ResNet-20 at large rho. The paper's exact round order, inner
// epochs, filters, hyper-parameters and reported speed-ups and accuracies are
// not verified. With the summary's default rho = 1 and the sum form, the
// inner stages' sub-problems diverge under SGD at lr 0.1 on ResNet-20: the
// experiments use rho ~ 1e-3 (README, "Layer-parallel training").
//
// The time model (TimeModel) predicts one round and the whole schedule
// against serial training from each stage's calibrated compute time and the
// bytes above.
package layerpar
