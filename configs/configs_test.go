package configs_test

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/gradwire/gradwire/configs"
)

// writeFile writes a YAML file named x.yaml in a fresh directory and returns its path.
func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "x.yaml")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestDefaultValidates(t *testing.T) {
	if err := configs.Default().Validate(); err != nil {
		t.Fatalf("Default().Validate() = %v", err)
	}
	got, err := configs.Load("", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := configs.Default()
	want.Name = "run"
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Load(\"\", nil) = %+v\nwant %+v", got, want)
	}
}

// TestKeys checks that Keys is sorted and matches the keys WriteYAML writes, which come
// from the yaml tags: a yaml tag that differs from its mapstructure tag shows up here.
func TestKeys(t *testing.T) {
	keys := configs.Keys()
	if !sort.StringsAreSorted(keys) || len(slices.Compact(slices.Clone(keys))) != len(keys) {
		t.Errorf("Keys() not sorted and unique: %v", keys)
	}
	b, err := yaml.Marshal(configs.Default())
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var written []string
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			if sub, ok := v.(map[string]any); ok {
				walk(prefix+k+".", sub)
			} else {
				written = append(written, prefix+k)
			}
		}
	}
	walk("", m)
	slices.Sort(written)
	if !slices.Equal(written, keys) {
		t.Errorf("written keys %v\nKeys() %v", written, keys)
	}
}

// TestShippedConfigs loads and validates every run config in this directory.
func TestShippedConfigs(t *testing.T) {
	files, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 7 {
		t.Fatalf("found %d shipped configs, want at least 7: %v", len(files), files)
	}
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			c, err := configs.Load(f, nil)
			if err != nil {
				t.Fatalf("Load(%s): %v", f, err)
			}
			if want := strings.TrimSuffix(f, ".yaml"); c.Name != want {
				t.Errorf("name = %q, want %q", c.Name, want)
			}
		})
	}
}

func TestLoadOverrides(t *testing.T) {
	path := writeFile(t, `
name: exp1
data:
  batch_size: 128
model:
  name: mlp
  hidden: [1024]
schedule:
  name: step
  milestones: [3, 4]
train:
  epochs: 6
`)
	got, err := configs.Load(path, []string{
		"optim.lr=0.2",
		"optim.lr=0.1", // later sets win
		"model.hidden=300,100",
		"schedule.milestones=[2, 4.5]",
		"optim.nesterov=true",
		"Train.Progress=false", // keys match case-insensitively, as in files
		"seed=-7",
		"data.dir=/tmp/my data",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := configs.Default()
	want.Name = "exp1"
	want.Seed = -7
	want.Data.BatchSize = 128
	want.Data.Dir = "/tmp/my data"
	want.Model.Name = "mlp"
	want.Model.Hidden = []int{300, 100}
	want.Optim.LR = 0.1
	want.Optim.Nesterov = true
	want.Schedule.Name = "step"
	want.Schedule.Milestones = []float64{2, 4.5}
	want.Train.Epochs = 6
	want.Train.Progress = false
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
}

func TestNameFromFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "my-run.yml")
	if err := os.WriteFile(path, []byte("seed: 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := configs.Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "my-run" || c.Seed != 3 {
		t.Errorf("name, seed = %q, %d; want my-run, 3", c.Name, c.Seed)
	}
}

func TestWriteYAMLRoundTrip(t *testing.T) {
	c := configs.Default()
	c.Name = "2024" // a string YAML would read as a number unless quoted
	c.Seed = 1 << 62
	c.Data.Dir = ""
	c.Model.Hidden = []int{7, 5, 3}
	c.Optim.LR = 0.1 / 3 // needs every digit to survive
	c.Optim.Eps = 1e-12
	c.Schedule.Name = "step"
	c.Schedule.Milestones = []float64{1.5, 3}
	c.Network.LatencyUs = 0

	dir := t.TempDir()
	path := filepath.Join(dir, "resolved.yaml")
	for range 2 { // the second write replaces the first
		if err := c.WriteYAML(path); err != nil {
			t.Fatal(err)
		}
	}
	got, err := configs.Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, c) {
		t.Errorf("round trip:\ngot  %+v\nwant %+v", got, c)
	}
	assertOnly(t, dir, "resolved.yaml")
}

// TestWriteYAMLFailure makes the final rename fail (the target is a non-empty
// directory) and checks that the temporary file is gone.
func TestWriteYAMLFailure(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "out.yaml")
	if err := os.MkdirAll(filepath.Join(target, "keep"), 0o755); err != nil {
		t.Fatal(err)
	}
	err := configs.Default().WriteYAML(target)
	if err == nil || !strings.Contains(err.Error(), target) {
		t.Fatalf("WriteYAML onto a directory: err = %v, want an error naming %s", err, target)
	}
	assertOnly(t, dir, "out.yaml")
}

func assertOnly(t *testing.T, dir string, names ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if !slices.Equal(got, names) {
		t.Errorf("%s holds %v, want only %v", dir, got, names)
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name string
		file string // YAML content; "" = no file
		sets []string
		want []string // substrings of the error; FILE stands for the file's path
	}{
		{
			name: "unknown key",
			file: "optim:\n  learning_rate: 0.1\n",
			want: []string{`FILE:2: unknown key "optim.learning_rate"; did you mean "optim.lr"?`, "valid optim keys: adapt_norm_bias, beta1, beta2,"},
		},
		{
			name: "a section set as a key",
			sets: []string{"compress.dgc=3"},
			want: []string{`--set: "compress.dgc" is a section, not a key: set one of its keys, compress.dgc.<key> (compress.dgc keys: clip_norm,`},
		},
		{
			name: "nested unknown key",
			file: "model:\n  name: resnet20\n  resnet:\n    depth: 20\n",
			want: []string{`FILE:4: unknown key "model.resnet.depth"`, "valid model keys: bn_epsilon"},
		},
		{
			name: "unknown section",
			file: "optimizer:\n  lr: 0.1\n",
			want: []string{`FILE:2: unknown key "optimizer.lr"`, "valid keys: compress, data,"},
		},
		{
			name: "key in the wrong section",
			file: "train:\n  batch_size: 32\n",
			want: []string{`FILE:2: unknown key "train.batch_size"; did you mean "data.batch_size"?`},
		},
		{
			name: "wrong type",
			file: "train:\n  epochs: five\n",
			want: []string{`FILE:2: train.epochs: "five": expected an integer`},
		},
		{
			name: "float for an integer",
			file: "data:\n  batch_size: 2.5\n",
			want: []string{`FILE:2: data.batch_size: 2.5: expected an integer`},
		},
		{
			name: "wrong list element",
			file: "model:\n  hidden: [512, big]\n",
			want: []string{`FILE:2: model.hidden: [512, "big"]: expected a list of integers`},
		},
		{
			name: "scalar section",
			file: "optim: 5\n",
			want: []string{`FILE:1: optim: 5: expected a mapping of optim keys`},
		},
		{
			name: "yaml syntax",
			file: "optim:\n  lr: [0.1\n",
			want: []string{"FILE: yaml: line "},
		},
		{
			name: "negative learning rate",
			file: "optim:\n  lr: -0.1\n",
			want: []string{"FILE:2: optim.lr: -0.1: must be a positive number"},
		},
		{
			name: "unknown model",
			file: "model:\n  name: resnet99\n",
			want: []string{`FILE:2: model.name: "resnet99": must be one of `, "lenet5"},
		},
		{
			name: "unknown ops",
			sets: []string{"model.ops=turbo"},
			want: []string{`--set: model.ops: "turbo": must be one of fast, gorgonia (empty means fast)`},
		},
		{
			name: "all problems at once",
			file: "optim:\n  lr: 0\ntrain:\n  epochs: 0\n",
			sets: []string{"data.batch_size=0"},
			want: []string{"FILE:2: optim.lr: 0: must be", "FILE:4: train.epochs: 0: must be at least 1", "--set: data.batch_size: 0: must be at least 1"},
		},
		{
			name: "set without =",
			sets: []string{"train.epochs"},
			want: []string{`--set: "train.epochs": expected key=value`},
		},
		{
			name: "set unknown key",
			sets: []string{"optim.weight_decy=0"},
			want: []string{`--set: unknown key "optim.weight_decy"; did you mean "optim.weight_decay"?`, "valid optim keys:"},
		},
		{
			name: "set bad value",
			sets: []string{"model.hidden=300,x", "train.progress=maybe"},
			want: []string{
				`--set: model.hidden: "300,x": expected a list of integers`,
				`--set: train.progress: "maybe": expected true or false`,
			},
		},
		{
			name: "model and data mismatch",
			sets: []string{"model.name=charlstm"},
			want: []string{`--set: model.name: "charlstm": needs data.name tinyshakespeare (data.name is "fashion-mnist")`},
		},
		{
			name: "augment without cifar",
			sets: []string{"data.augment=true"},
			want: []string{`data.augment: true: only cifar10 and cifar100`},
		},
		{
			name: "negative validation split",
			sets: []string{"data.validation=-5"},
			want: []string{`--set: data.validation: -5: must be >= 0: the number of training examples held out`},
		},
		{
			name: "label smoothing of 1",
			sets: []string{"model.label_smoothing=1"},
			want: []string{`--set: model.label_smoothing: 1: must be in [0, 1)`},
		},
		{
			name: "nesterov without momentum",
			sets: []string{"optim.nesterov=true", "optim.momentum=0"},
			want: []string{`--set: optim.nesterov: true: needs optim.momentum > 0`},
		},
		{
			name: "milestones out of order",
			sets: []string{"schedule.milestones=[3, 2]"},
			want: []string{`schedule.milestones: [3, 2]: must be positive epochs in increasing order`},
		},
		{
			name: "warm-up longer than training",
			sets: []string{"schedule.warmup_epochs=6"},
			want: []string{`schedule.warmup_epochs: 6: must be in [0, train.epochs] = [0, 5]`},
		},
		{
			// The file's key broke a rule because of a --set key: the
			// message says which value came from --set.
			name: "file key against a set key",
			file: "data:\n  global_batch: 128\n",
			sets: []string{"dist.workers=3"},
			want: []string{"FILE:2: data.global_batch: 128: must split evenly over dist.workers=3 (a multiple of 3) (dist.workers given by --set)"},
		},
		{
			name: "default key against a set key",
			file: "schedule:\n  warmup_epochs: 3\n",
			sets: []string{"train.epochs=2"},
			want: []string{"FILE:2: schedule.warmup_epochs: 3: must be in [0, train.epochs] = [0, 2] (train.epochs given by --set)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := ""
			if tt.file != "" {
				path = writeFile(t, tt.file)
			}
			_, err := configs.Load(path, tt.sets)
			if err == nil {
				t.Fatal("Load succeeded, want an error")
			}
			for _, w := range tt.want {
				if w = strings.ReplaceAll(w, "FILE", path); !strings.Contains(err.Error(), w) {
					t.Errorf("error:\n%v\nwant it to contain %q", err, w)
				}
			}
		})
	}
}

// TestLoadTopLevelNotAMapping: a file whose document is a list or a bare value is
// refused in the config's own terms, with its line; an empty file (or one of
// comments) gives the defaults.
func TestLoadTopLevelNotAMapping(t *testing.T) {
	for _, c := range []struct{ text, found string }{
		{"- optim\n- data\n", "found a list"},
		{"# a value\n42\n", "found a single value"},
	} {
		path := writeFile(t, c.text)
		_, err := configs.Load(path, nil)
		if err == nil {
			t.Errorf("%q: Load succeeded, want an error", c.text)
			continue
		}
		for _, w := range []string{path + ":", "expected a mapping of the config's keys (compress, data,", c.found} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q: error %q does not contain %q", c.text, err, w)
			}
		}
	}
	for _, text := range []string{"", "# nothing yet\n", "---\n"} {
		if _, err := configs.Load(writeFile(t, text), nil); err != nil {
			t.Errorf("%q: %v, want the defaults", text, err)
		}
	}
}

// TestLoadIntegerBeyondInt64: a file's integer too large for an int64 (YAML reads
// it as a float or a uint64) is refused naming the range, with its line.
func TestLoadIntegerBeyondInt64(t *testing.T) {
	if strconv.IntSize == 32 {
		t.Skip("a 32-bit build names its own int range")
	}
	path := writeFile(t, "data:\n  batch_size: 99999999999999999999\ntrain:\n  epochs: 18446744073709551615\n  max_steps: 1e3\n")
	_, err := configs.Load(path, nil)
	if err == nil {
		t.Fatal("Load succeeded, want an error")
	}
	for _, w := range []string{
		path + ":2: data.batch_size: 1e+20: expected an integer from -9223372036854775808 to 9223372036854775807",
		path + ":4: train.epochs: 18446744073709551615: expected an integer from -9223372036854775808",
		path + ":5: train.max_steps: 1000: expected an integer\n",
	} {
		if !strings.Contains(err.Error()+"\n", w) {
			t.Errorf("error:\n%v\nwant it to contain %q", err, w)
		}
	}
}

// TestLoadNoFollowOnError: an invalid train.epochs is reported once, in its own
// words, not also as a warm-up longer than it.
func TestLoadNoFollowOnError(t *testing.T) {
	path := writeFile(t, "train:\n  epochs: -3\n")
	_, err := configs.Load(path, nil)
	if err == nil {
		t.Fatal("Load succeeded, want an error")
	}
	if want := path + ":2: train.epochs: -3: must be at least 1"; !strings.Contains(err.Error(), want) {
		t.Errorf("error:\n%v\nwant it to contain %q", err, want)
	}
	if strings.Contains(err.Error(), "schedule.warmup_epochs") {
		t.Errorf("error:\n%v\nwant no follow-on schedule.warmup_epochs error", err)
	}
}

// TestLoadErrorLines: every error about a key of the file names the line the key
// is written on, whatever the kind of error and however deep the key. Type errors
// and unknown keys are one stage, broken rules the next, so each has its file.
func TestLoadErrorLines(t *testing.T) {
	typeErrors := `# a run config with a mistake in each section
name: lines
data:
  name: fashion-mnist
  batch_size: 2.5

model:
  name: mlp
  resnet:
    depth: 20
train:
  epochs: 3
  # comments and blank lines count as lines

  max_steps: many
dist: 4
`
	ruleErrors := `name: lines
model:
  name: mlp
  hidden:
    - 512
    - 0
optim:
  name: sgd

  lr: -1
`
	for _, tc := range []struct {
		file string
		want []string
	}{
		{typeErrors, []string{
			`:5: data.batch_size: 2.5: expected an integer`,
			`:10: unknown key "model.resnet.depth"`,
			`:15: train.max_steps: "many": expected an integer`,
			`:16: dist: 4: expected a mapping of dist keys`,
		}},
		{ruleErrors, []string{
			`:4: model.hidden: [512, 0]: must be a non-empty list of sizes >= 1`,
			`:10: optim.lr: -1: must be a positive number`,
		}},
	} {
		path := writeFile(t, tc.file)
		_, err := configs.Load(path, nil)
		if err == nil {
			t.Fatal("Load succeeded, want an error")
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), path+w) {
				t.Errorf("error:\n%v\nwant it to contain %q", err, path+w)
			}
		}
	}
}

// TestLoadErrorLinesMerge: a key brought in by a YAML merge is reported at the
// anchor's line, and one the mapping writes itself at its own line.
func TestLoadErrorLinesMerge(t *testing.T) {
	path := writeFile(t, `optim: &o
  clip_norm: -1
schedule: &s
  warmup_epochs: -2
compress:
  dgc:
    <<: [*o, *s]
    warmup_epochs: -3
`)
	_, err := configs.Load(path, nil)
	if err == nil {
		t.Fatal("Load succeeded, want an error")
	}
	for _, w := range []string{
		`:2: optim.clip_norm: -1:`,
		`:4: schedule.warmup_epochs: -2:`,
		`:2: compress.dgc.clip_norm: -1:`,
		`:8: compress.dgc.warmup_epochs: -3:`,
	} {
		if !strings.Contains(err.Error(), path+w) {
			t.Errorf("error:\n%v\nwant it to contain %q", err, path+w)
		}
	}
}

func TestLoadMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing.yaml")
	if _, err := configs.Load(path, nil); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("Load(missing) error = %v, want one naming %s", err, path)
	}
}

// TestValidateAll breaks every rule it can at once and checks that each problem is
// reported, under a key that exists.
func TestGlobalBatchSplit(t *testing.T) {
	_, err := configs.Load("", []string{"data.global_batch=100", "dist.workers=8"})
	if err == nil || !strings.Contains(err.Error(), "data.global_batch: 100") || !strings.Contains(err.Error(), "dist.workers=8") {
		t.Fatalf("error %v: expected data.global_batch 100 not to split over 8 workers", err)
	}
	c, err := configs.Load("", []string{"data.global_batch=128", "dist.workers=4"})
	if err != nil {
		t.Fatal(err)
	}
	if c.WorkerBatch() != 32 {
		t.Fatalf("worker batch %d, want 32", c.WorkerBatch())
	}
}

func TestValidateAll(t *testing.T) {
	c := configs.Default()
	c.Data.Name = "imagenet"
	c.Data.BatchSize = 0
	c.Data.EvalBatchSize = -1
	c.Data.SeqLen = 0
	c.Data.Augment = true
	c.Data.Validation, c.Data.LabelNoise = -1, 1
	c.Model.Name = "vit"
	c.Model.Hidden = []int{}
	c.Model.HiddenSize, c.Model.Layers, c.Model.EmbedDim = 0, 0, 0
	c.Model.BNMomentum, c.Model.BNEpsilon = 0, 0
	c.Model.Ops, c.Model.Precision = "turbo", "float16"
	c.Model.ZeroInitResidual, c.Model.LabelSmoothing = true, 1
	c.Optim.Name = "lion"
	c.Optim.LR = -0.1
	c.Optim.Momentum = 1
	c.Optim.WeightDecay = -1
	c.Optim.Beta1, c.Optim.Beta2 = 1, -0.5
	c.Optim.Eps = -1 // 0 would take the optimizer's default
	c.Optim.ClipNorm = -1
	c.Schedule.Name = "poly-x"
	c.Schedule.Milestones = []float64{0}
	c.Schedule.Gamma = 1.5
	c.Schedule.MinLR = -1
	c.Schedule.WarmupEpochs = -1
	c.Schedule.BaseBatch = -1
	c.Schedule.Scaling = "cubic"
	c.Optim.LARSEta, c.Optim.LAMBMaxGradNorm, c.Schedule.Power = -1, -1, -1
	c.Optim.SAMRho, c.Optim.SAMEta, c.Optim.SAMAdaptive = -1, -1, true
	c.Train.Epochs, c.Train.LogEvery, c.Train.MaxSteps, c.Train.EvalLimit = 0, 0, -1, -1
	c.Train.CheckpointEvery, c.Train.CheckpointMinutes, c.Train.KeepCheckpoints, c.Train.MaxLoss = -1, -1, 0, -1
	c.Train.StallEpochs = -1
	c.Dist.Workers, c.Dist.Replicas, c.Dist.Backend = 0, -1, "grpc"
	c.Dist.Ranks, c.Dist.CheckEvery, c.Dist.Pipeline, c.Data.GlobalBatch = -1, 0, 0, -8
	c.Dist.Mode, c.Dist.Staleness, c.Dist.Delay, c.Dist.DelayMean, c.Dist.Backups = "gossip", -2, "weibull", 0, -1
	c.Dist.Passes = "fused"
	c.Compress.Name = "zip"
	c.Compress.MinSize, c.Compress.Density = -1, 2
	c.Compress.DGC.ClipNorm, c.Compress.DGC.WarmupEpochs, c.Compress.DGC.WarmupSchedule, c.Compress.DGC.SampleRatio = -1, -1, "fast", 0
	c.Compress.DGC.WeightDecayAt, c.Compress.DGC.Preset = "gradient", "fast"
	c.Compress.AdaComp.BinConv, c.Compress.AdaComp.BinFC = 0, 0
	c.Compress.PowerSGD.Rank, c.Compress.PowerSGD.StartIter, c.Compress.PowerSGD.MinCompressionRate, c.Compress.PowerSGD.Epsilon = 0, -1, 0, -1
	c.Compress.TernGrad.ClipC = -1
	c.Compress.QSGD.Levels, c.Compress.QSGD.BucketSize, c.Compress.QSGD.Norm = 0, 0, "l1"
	c.Compress.ScaleCom.Beta, c.Compress.ScaleCom.WarmupEpochs = 0, -1
	c.Compress.GradiVeQ.SliceSize, c.Compress.GradiVeQ.Rank, c.Compress.GradiVeQ.Lambda = 0, -1, 1
	c.Compress.GradiVeQ.WarmupSteps, c.Compress.GradiVeQ.SampleSteps, c.Compress.GradiVeQ.CompressSteps = -1, 0, 0
	c.Compress.GradiVeQ.QuantizeBits = 1
	l := &c.Compress.LGC
	l.Variant, l.DenseSteps, l.TrainSteps, l.InnovationRatio, l.LatentRatio = "mesh", -1, -1, 0, 0
	l.Hidden, l.Lambda1, l.Lambda2, l.LR, l.Optimizer = 0, 0, -1, 0, "lbfgs"
	c.Network.BandwidthGbps, c.Network.LatencyUs, c.Network.Topology = 0, -1, "mesh"
	c.Data.TrainLimit, c.Train.Mode = -1, "pipeline"
	lp := &c.LayerParallel
	lp.Method, lp.Rho, lp.RhoGrowth, lp.RhoMax, lp.UCurvature = "admm", 0, 0.5, -1, -1
	lp.Downsample, lp.SerialEpochs, lp.Cycles = 0, -1, 0

	err := c.Validate()
	if err == nil {
		t.Fatal("Validate succeeded")
	}
	lines := strings.Split(err.Error(), "\n")
	reported := map[string]bool{}
	for _, l := range lines {
		key, _, _ := strings.Cut(l, ":")
		if !slices.Contains(configs.Keys(), key) {
			t.Errorf("problem under unknown key: %s", l)
		}
		reported[key] = true
	}
	// Every key but the free-form ones must have been reported.
	for _, k := range configs.Keys() {
		switch k {
		case "name", "seed", "data.dir", "data.normalize", "optim.nesterov",
			"optim.decay_norm_bias", "optim.adapt_norm_bias", "optim.lars_clip", "optim.lamb_no_bias_correction",
			"optim.novograd_grad_averaging", "optim.novograd_eps_inside_sqrt",
			"train.progress", "train.checkpoint", "compress.residual", "compress.fp16_values", "compress.dense_fp16",
			"compress.narrow_indices", "layer_parallel.aux_fp16",
			"compress.dgc.momentum_correction", "compress.dgc.factor_masking", "compress.dgc.sampling",
			"compress.adacomp.fp32_values", "compress.powersgd.error_feedback", "compress.powersgd.warm_start":
			continue
		case "compress.gradiveq.center", "compress.gradiveq.error_feedback",
			"compress.lgc.momentum_correction", "compress.lgc.factor_masking":
			continue
		}
		if !reported[k] {
			t.Errorf("no problem reported for %s", k)
		}
	}
}

// TestValidateUpperBounds: sizes that would exhaust memory or take minutes to
// build are refused with the key, the value and the bound; sizes at the bound
// pass.
func TestValidateUpperBounds(t *testing.T) {
	long := strings.TrimSuffix(strings.Repeat("8,", 20000), ",")
	for _, tc := range []struct {
		sets []string
		want string
	}{
		{[]string{"dist.workers=1000000"}, "--set: dist.workers: 1000000: must be at most 4096"},
		{[]string{"dist.workers=9223372036854775807"}, "--set: dist.workers: 9223372036854775807: must be at most 4096"},
		{[]string{"dist.replicas=5000"}, "--set: dist.replicas: 5000: must be at most 4096"},
		{[]string{"dist.pipeline=3"}, "--set: dist.pipeline: 3: must be 1 (exchange, then the next step) or 2"},
		{[]string{"dist.mode=ps", "dist.staleness=-1", "compress.name=dgc"}, "--set: compress.name: \"dgc\": with dist.mode ps and dist.staleness -1 (asynchronous updates) needs compress.name none"},
		{[]string{"dist.staleness=-3"}, "--set: dist.staleness: -3: must be -1 (asynchronous), 0 (synchronous) or a bound k > 0"},
		{[]string{"dist.workers=4", "dist.backups=4"}, "--set: dist.backups: 4: must be >= 0 and below dist.workers (4)"},
		{[]string{"dist.workers=4", "dist.backups=1"}, "dist.delay: \"none\": with dist.backups 1 (the slowest workers' gradients left out) needs a delay model (exp)"},
		{[]string{"dist.pipeline=2", "model.precision=float64"}, "--set: dist.pipeline: 2: 2 needs model.precision float32"},
		{[]string{"dist.backend=mpi", "dist.ranks=4097"}, "--set: dist.ranks: 4097: must be at most 4096"},
		{[]string{"data.eval_batch_size=100000000"}, "--set: data.eval_batch_size: 100000000: must be at most 1048576"},
		{[]string{"data.batch_size=2000000"}, "--set: data.batch_size: 2000000: must be at most 1048576"},
		{[]string{"data.global_batch=2097152"}, "--set: data.global_batch: 2097152: must be at most 1048576"},
		{[]string{"model.hidden=" + long}, "--set: model.hidden: [8, 8, 8, 8, 8, 8, 8, 8, ... (20000 values)]: must have at most 64 layers (has 20000)"},
		{[]string{"model.hidden=512,2000000"}, "--set: model.hidden: [512, 2000000]: each size must be at most 1048576"},
		{[]string{"model.hidden_size=1048577"}, "--set: model.hidden_size: 1048577: must be at most 1048576"},
		{[]string{"model.layers=65"}, "--set: model.layers: 65: must be at most 64"},
		{[]string{"model.embed_dim=1048577"}, "--set: model.embed_dim: 1048577: must be at most 1048576"},
		// Beyond any int64: the error names the range, not only the type.
		{[]string{"data.batch_size=99999999999999999999"}, "--set: data.batch_size: \"99999999999999999999\": expected an integer from -9223372036854775808 to 9223372036854775807"},
	} {
		if strconv.IntSize == 32 && strings.Contains(tc.sets[0], "=9223372036854775807") {
			tc.want = "dist.workers: \"9223372036854775807\": expected an integer from -2147483648 to 2147483647"
		}
		if strconv.IntSize == 32 {
			tc.want = strings.Replace(tc.want, "from -9223372036854775808 to 9223372036854775807", "from -2147483648 to 2147483647", 1)
		}
		_, err := configs.Load("", tc.sets)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%.60v: error %.300v, want %q", tc.sets, err, tc.want)
		}
	}
	at := []string{"dist.workers=4096", "data.global_batch=1048576", "data.eval_batch_size=1048576", "dist.replicas=4096",
		"model.hidden=" + strings.TrimSuffix(strings.Repeat("1048576,", 64), ","), "model.hidden_size=1048576", "model.layers=64", "model.embed_dim=1048576"}
	if _, err := configs.Load("", at); err != nil {
		t.Errorf("sizes at the bounds: %v", err)
	}
	// The bound is named in a file's error too, with its line.
	path := writeFile(t, "data:\n  batch_size: 64\ndist:\n  workers: 1000000\n")
	if _, err := configs.Load(path, nil); err == nil || !strings.Contains(err.Error(), path+":4: dist.workers: 1000000: must be at most 4096") {
		t.Errorf("file error %v", err)
	}
}

func TestValidateNonFinite(t *testing.T) {
	for _, v := range []string{"nan", "inf", "-inf"} {
		if _, err := configs.Load("", []string{"optim.lr=" + v}); err == nil || !strings.Contains(err.Error(), "optim.lr") {
			t.Errorf("optim.lr=%s: err = %v, want an optim.lr problem", v, err)
		}
	}
}

func ExampleLoad() {
	c, err := configs.Load("", []string{"model.name=mlp", "model.hidden=300,100", "optim.lr=0.1"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(c.Name, c.Model.Name, c.Model.Hidden, c.Optim.LR)

	_, err = configs.Load("", []string{"optim.learning_rate=0.1"})
	fmt.Println(err)
	// Output:
	// run mlp [300 100] 0.1
	// --set: unknown key "optim.learning_rate"; did you mean "optim.lr"? (valid optim keys: adapt_norm_bias, beta1, beta2, clip_norm, decay_norm_bias, eps, lamb_max_grad_norm, lamb_no_bias_correction, lars_clip, lars_eta, lr, momentum, name, nesterov, novograd_eps_inside_sqrt, novograd_grad_averaging, sam_adaptive, sam_eta, sam_rho, weight_decay)
}

func TestDGCNeedsSGD(t *testing.T) {
	_, err := configs.Load("", []string{"compress.name=dgc", "optim.name=adam"})
	if err == nil || !strings.Contains(err.Error(), "compress.name") || !strings.Contains(err.Error(), "needs optim.name sgd") {
		t.Fatalf("error %v: expected dgc with momentum correction to require sgd", err)
	}
	if _, err := configs.Load("", []string{"compress.name=dgc", "optim.name=adam", "compress.dgc.momentum_correction=false"}); err != nil {
		t.Fatalf("dgc without momentum correction works with any optimizer: %v", err)
	}
}

// TestClipNormWithMomentumCorrectionRefused: optim.clip_norm clips what the
// exchange hands the optimizer, which under DGC's momentum correction is the
// sparse accumulated velocity; DGC's own local clipping is the paper's.
func TestClipNormWithMomentumCorrectionRefused(t *testing.T) {
	_, err := configs.Load("", []string{"compress.name=dgc", "optim.clip_norm=5"})
	if err == nil || !strings.Contains(err.Error(), "optim.clip_norm") || !strings.Contains(err.Error(), "compress.dgc.clip_norm") {
		t.Fatalf("error %v: expected optim.clip_norm with dgc's momentum correction refused, pointing to compress.dgc.clip_norm", err)
	}
	for _, sets := range [][]string{
		{"compress.name=dgc", "compress.dgc.clip_norm=5"},
		{"compress.name=dgc", "compress.dgc.momentum_correction=false", "optim.clip_norm=5"},
		{"compress.name=powersgd", "optim.clip_norm=5"},
	} {
		if _, err := configs.Load("", sets); err != nil {
			t.Errorf("%v: %v", sets, err)
		}
	}
}

func TestFloat64PrecisionNeedsDenseExchange(t *testing.T) {
	if _, err := configs.Load("", []string{"model.precision=float64"}); err != nil {
		t.Fatalf("float64 with the default dense exchange: %v", err)
	}
	for _, sets := range [][]string{
		{"model.precision=float64", "compress.name=dgc"},
		{"model.precision=float64", "compress.dense_fp16=true"},
	} {
		_, err := configs.Load("", sets)
		if err == nil || !strings.Contains(err.Error(), `model.precision: "float64"`) || !strings.Contains(err.Error(), "compress.name none") {
			t.Errorf("%v: err = %v, want a model.precision problem naming compress.name none", sets, err)
		}
	}
}

func TestNarrowIndicesNeedsIndices(t *testing.T) {
	for name, ok := range map[string]bool{"topk": true, "dgc": true, "adacomp": false, "powersgd": false, "none": false} {
		_, err := configs.Load("", []string{"compress.name=" + name, "compress.narrow_indices=true"})
		if ok && err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if !ok && (err == nil || !strings.Contains(err.Error(), "compress.narrow_indices: true: only topk and dgc send indices")) {
			t.Errorf("%s: err = %v, want a compress.narrow_indices problem", name, err)
		}
	}
}

// TestDGCPreset: compress.dgc.preset recipe fills in its keys where the file
// and --set leave them out, each of those keeps its own value, and a preset is
// refused for another compressor or under an unknown name.
func TestDGCPreset(t *testing.T) {
	def, err := configs.Load("", []string{"compress.name=dgc"})
	if err != nil {
		t.Fatal(err)
	}
	d := def.Compress.DGC
	if d.Preset != "paper" || !d.FactorMasking || !d.Sampling || d.WarmupSchedule != "paper" || d.WarmupEpochs != 4 || d.ClipNorm != 0 ||
		def.Compress.NarrowIndices || def.Compress.DenseFP16 {
		t.Errorf("defaults are not the paper's settings: %+v", def.Compress)
	}

	path := writeFile(t, "compress:\n  name: dgc\n  dgc:\n    preset: recipe\n    clip_norm: 2\n")
	c, err := configs.Load(path, []string{"compress.dgc.sampling=true"})
	if err != nil {
		t.Fatal(err)
	}
	d = c.Compress.DGC
	if d.Preset != "recipe" || d.FactorMasking || d.WarmupSchedule != "stages" || d.WarmupEpochs != 1 ||
		!c.Compress.NarrowIndices || !c.Compress.DenseFP16 || !d.MomentumCorrection {
		t.Errorf("recipe preset not applied: %+v", c.Compress)
	}
	if d.ClipNorm != 2 {
		t.Errorf("clip_norm from the file = %v, want 2 (the file's value, not the preset's 5)", d.ClipNorm)
	}
	if !d.Sampling {
		t.Error("--set compress.dgc.sampling=true lost to the preset")
	}
	// The preset from --set, on a file that sets a key it covers.
	path = writeFile(t, "compress:\n  name: dgc\n  dgc:\n    factor_masking: true\n")
	c, err = configs.Load(path, []string{"compress.dgc.preset=recipe"})
	if err != nil {
		t.Fatal(err)
	}
	if !c.Compress.DGC.FactorMasking || c.Compress.DGC.ClipNorm != 5 || c.Compress.DGC.Sampling {
		t.Errorf("--set preset on a file: %+v", c.Compress.DGC)
	}

	for _, tc := range []struct {
		sets []string
		want string
	}{
		{[]string{"compress.name=topk", "compress.dgc.preset=recipe"}, `compress.dgc.preset: "recipe": applies to compress.name dgc (compress.name is "topk")`},
		{[]string{"compress.name=dgc", "compress.dgc.preset=fast"}, `compress.dgc.preset: "fast": must be one of paper, recipe`},
	} {
		if strconv.IntSize == 32 && strings.Contains(tc.sets[0], "=9223372036854775807") {
			tc.want = "dist.workers: \"9223372036854775807\": expected an integer from -2147483648 to 2147483647"
		}
		_, err := configs.Load("", tc.sets)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want %q", tc.sets, err, tc.want)
		}
	}
}
