package sd

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/rocm-go/rocm/candle"
	"github.com/rocm-go/rocm/candle/models"
	"github.com/rocm-go/rocm/candle/safetensors"
	"github.com/rocm-go/rocm/errs"
)

// LoRA is a low-rank adaptation of a pipeline, a safetensors file that
// OpenWith merges into the text encoders' and the UNet's weights as they
// load (Options.LoRAs). Each module it adapts holds a down matrix (rank r
// rows) and an up matrix (r columns), and may hold an alpha; the module's
// weight W loads as
//
//	W + Scale·(alpha/r)·(up @ down)
//
// computed on the device in F32 and converted to W's dtype, where alpha
// is r when the file has none. A convolution's LoRA (kohya's LoCon: down
// [r, in, kh, kw], up [out, r, 1, 1]) is the same product, up as out×r
// and down as r×(in·kh·kw), shaped as W. Scale 0 leaves the weights as
// they are; several LoRAs add up, merged in order.
//
// One file may adapt the UNet and the text encoders. Its tensors are named
// in one of two ways:
//   - kohya / AUTOMATIC1111: lora_unet_<module>.lora_down.weight,
//     .lora_up.weight and .alpha, with the module's diffusers path
//     written with '_' for '.' (lora_unet_down_blocks_0_attentions_0_proj_in);
//     lora_te_ (lora_te1_ on XL) for text_encoder and lora_te2_ for XL's
//     text_encoder_2 (lora_te_text_model_encoder_layers_0_self_attn_q_proj).
//     A module is found by matching the name against the component's own
//     weights' names, or for the UNet against their names in the LDM
//     checkpoints' layout, which kohya's SDXL files use
//     (lora_unet_input_blocks_4_1_transformer_blocks_0_attn1_to_q).
//   - diffusers / PEFT: unet.<module>.lora_A.weight (down) and
//     .lora_B.weight (up), or diffusers' older .lora.down.weight and
//     .lora.up.weight, .lora_linear_layer.down.weight and .up.weight, and
//     attention processors' <attn>.processor.to_q_lora.down.weight (to_k,
//     to_v, to_out: the attention's to_q… or a text encoder's q_proj…),
//     with text_encoder. and text_encoder_2. for the text encoders,
//     .alpha where the file has one; names without a component are the
//     UNet's.
//
// A tensor of the file that adapts no weight of the pipeline is an error
// of kind errs.ErrFormat that names it, and an up and down whose product
// does not have the weight's shape one of kind errs.ErrShape. LyCORIS's
// other kinds (LoHa's hada_, LoKr, DoRA's dora_scale) are not taken: they
// are errors of kind errs.ErrFormat.
type LoRA struct {
	// Path is the .safetensors file.
	Path string
	// Scale multiplies the file's update (a UI's LoRA weight, often 0.5
	// to 1).
	Scale float64
}

// loraPrefixes are the components' names in LoRA files, longest first
// where one is the start of another.
var loraPrefixes = []struct {
	prefix, component string
	kohya             bool
}{
	{"lora_unet_", "unet", true},
	{"lora_te1_", "text_encoder", true},
	{"lora_te2_", "text_encoder_2", true},
	{"lora_te_", "text_encoder", true},
	{"unet.", "unet", false},
	{"text_encoder_2.", "text_encoder_2", false},
	{"text_encoder.", "text_encoder", false},
}

// loraParts are the names of a module's tensors after its name.
var loraParts = []struct{ suffix, part string }{
	{".lora_down.weight", "down"},
	{".lora_up.weight", "up"},
	{".lora_A.weight", "down"},
	{".lora_B.weight", "up"},
	{".lora.down.weight", "down"},
	{".lora.up.weight", "up"},
	{".lora_linear_layer.down.weight", "down"},
	{".lora_linear_layer.up.weight", "up"},
	{"_lora.down.weight", "down"}, // attention processors' to_q_lora
	{"_lora.up.weight", "up"},
	{".alpha", "alpha"},
}

// moduleAliases give a component's modules names in another layout than
// the folder's diffusers one, which kohya files also use (the LDM
// checkpoints' input_blocks.4.1.transformer_blocks.0.attn1.to_q for SDXL's
// UNet): for a component ("unet"), a function of its weights' names to a
// table from the other layout's module paths to the folder's.
var moduleAliases = map[string]func(names []string) map[string]string{"unet": ldmUNetAliases,
	"text_encoder": textModelAliases, "text_encoder_2": textModelAliases}

// textModelAliases give a text encoder saved without text_model. (as
// transformers 5 saves it) the module names LoRA files use.
func textModelAliases(names []string) map[string]string {
	out := map[string]string{}
	for _, n := range names {
		if m, ok := strings.CutSuffix(n, ".weight"); ok && !strings.HasPrefix(m, "text_model.") && m != "text_projection" {
			out["text_model."+m] = m
		}
	}
	return out
}

// loraModule is one module's adaptation in a LoRA file.
type loraModule struct {
	file      *safetensors.File
	key       string // the module's name in the file, for errors
	component string
	module    string // kohya: underscored; else the dotted path
	kohya     bool
	down, up  string // tensor names
	alpha     string // "" where the file has none
	downShape candle.Shape
	upShape   candle.Shape
	factor    float64 // Scale·alpha/rank
}

// loraSet is the LoRAs that a pipeline merges as it loads.
type loraSet struct {
	files []*safetensors.File
	mods  map[string][]*loraModule // by component
}

// openLoRAs opens LoRA files and reads which modules they adapt; nil for
// none.
func openLoRAs(list []LoRA) (*loraSet, error) {
	if len(list) == 0 {
		return nil, nil
	}
	l := &loraSet{mods: map[string][]*loraModule{}}
	for _, lo := range list {
		if math.IsNaN(lo.Scale) || math.IsInf(lo.Scale, 0) {
			l.close()
			return nil, &errs.Error{Pkg: string(pkg), Op: "Open", Kind: errs.ErrArgument, Path: lo.Path, Field: "Scale", Detail: fmt.Sprintf("%v is not a scale", lo.Scale)}
		}
		f, err := safetensors.OpenFile(lo.Path)
		if err != nil {
			l.close()
			return nil, err
		}
		l.files = append(l.files, f)
		if err := l.read(f, lo.Scale); err != nil {
			l.close()
			return nil, errs.AtPath(err, lo.Path)
		}
	}
	return l, nil
}

// read groups a file's tensors by module.
func (l *loraSet) read(f *safetensors.File, scale float64) error {
	const op = "Open"
	names := f.Names()
	if len(names) == 0 {
		return pkg.Errorf(op, errs.ErrFormat, "the LoRA file holds no tensors")
	}
	byKey := map[string]*loraModule{}
	var order []*loraModule
	for _, name := range names {
		m, part, err := parseLoRAName(name)
		if err != nil {
			return err
		}
		if prev, ok := byKey[m.component+"\x00"+m.module]; ok {
			m = prev
		} else {
			m.file = f
			byKey[m.component+"\x00"+m.module] = m
			order = append(order, m)
		}
		slot := map[string]*string{"down": &m.down, "up": &m.up, "alpha": &m.alpha}[part]
		if *slot != "" {
			return pkg.Errorf(op, errs.ErrFormat, "LoRA tensors %q and %q are both module %q's %s", *slot, name, m.key, part)
		}
		*slot = name
	}
	for _, m := range order {
		if m.down == "" || m.up == "" {
			missing := "down"
			if m.up == "" {
				missing = "up"
			}
			return pkg.Errorf(op, errs.ErrFormat, "LoRA module %q has no %s matrix", m.key, missing)
		}
		for _, t := range []string{m.down, m.up} {
			if info, _ := f.Info(t); !info.Dense {
				return pkg.Errorf(op, errs.ErrDType, "LoRA tensor %q is %s, not a float type", t, info.Type)
			}
		}
		di, _ := f.Info(m.down)
		ui, _ := f.Info(m.up)
		m.downShape, m.upShape = di.Shape, ui.Shape
		d, u := m.downShape, m.upShape
		if (len(d) != 2 && len(d) != 4) || (len(u) != 2 && len(u) != 4) || u[1] != d[0] || d[0] == 0 ||
			(len(u) == 4 && (u[2] != 1 || u[3] != 1)) {
			return pkg.Errorf(op, errs.ErrShape, "LoRA module %q: up %v and down %v are not an out×r and an r×in (or r×in×kh×kw) pair", m.key, u, d)
		}
		rank := float64(d[0])
		alpha := rank
		if m.alpha != "" {
			var err error
			if alpha, err = scalar(f, m.alpha); err != nil {
				return err
			}
		}
		m.factor = scale * alpha / rank
		l.mods[m.component] = append(l.mods[m.component], m)
	}
	return nil
}

// parseLoRAName splits a LoRA file's tensor name into its module and which
// of the module's tensors it is.
func parseLoRAName(name string) (*loraModule, string, error) {
	bad := func() error {
		return pkg.Errorf("Open", errs.ErrFormat, "LoRA tensor %q is not a kohya (lora_unet_…, lora_te_…) or diffusers (unet.…, text_encoder.…) LoRA tensor", name)
	}
	for _, s := range loraParts {
		base, ok := strings.CutSuffix(name, s.suffix)
		if !ok || base == "" {
			continue
		}
		for _, pre := range loraPrefixes {
			if mod, ok := strings.CutPrefix(base, pre.prefix); ok {
				if mod == "" || (pre.kohya && strings.Contains(mod, ".")) {
					return nil, "", bad()
				}
				return &loraModule{key: base, component: pre.component, module: mod, kohya: pre.kohya}, s.part, nil
			}
		}
		if strings.HasPrefix(base, "lora_") || !strings.Contains(base, ".") {
			return nil, "", bad()
		}
		// diffusers' names without a component are the UNet's.
		return &loraModule{key: base, component: "unet", module: base}, s.part, nil
	}
	return nil, "", bad()
}

// scalar reads a one-element tensor (an alpha).
func scalar(f *safetensors.File, name string) (float64, error) {
	info, _ := f.Info(name)
	if !info.Dense || info.Shape.Elems() != 1 {
		return 0, pkg.Errorf("Open", errs.ErrFormat, "LoRA alpha %q is %s %v, not one number", name, info.Type, info.Shape)
	}
	t, err := f.Load(name, candle.CPU())
	if err != nil {
		return 0, pkg.Wrap("Open", err)
	}
	defer t.Close()
	t64, err := t.ToDType(candle.F64)
	if err != nil {
		return 0, pkg.Wrap("Open", err)
	}
	defer t64.Close()
	v, err := candle.ToSlice[float64](t64)
	if err != nil {
		return 0, pkg.Wrap("Open", err)
	}
	return v[0], nil
}

// view is a component's weights w with the LoRAs of the component merged
// in; w itself where they adapt none of it. It checks every module against
// w's weights. Closing the view closes w.
func (l *loraSet) view(component string, w candle.Weights) (candle.Weights, error) {
	if l == nil {
		return w, nil
	}
	mods := l.mods[component]
	if len(mods) == 0 {
		return w, nil
	}
	t := newModuleTable(component, w.Names())
	v := &loraView{Weights: w, merges: map[string][]*loraModule{}}
	for _, m := range mods {
		module, err := t.resolve(m)
		if err != nil {
			return nil, errs.AtPath(err, m.file.Path())
		}
		name := module + ".weight"
		info, _ := w.Info(name)
		if !info.Dense {
			return nil, errs.AtPath(pkg.Errorf("Open", errs.ErrDType, "LoRA module %q adapts %s, a %s tensor, which LoRAs do not merge into", m.key, name, info.Type), m.file.Path())
		}
		out, rest := m.upShape[0], m.downShape.Elems()/m.downShape[0]
		if s := info.Shape; len(s) < 2 || s[0] != out || s.Elems()/s[0] != rest {
			return nil, errs.AtPath(pkg.Errorf("Open", errs.ErrShape, "LoRA module %q: up %v @ down %v is %d×%d, and %s of the %s is %v",
				m.key, m.upShape, m.downShape, out, rest, name, component, s), m.file.Path())
		}
		if m.factor != 0 {
			v.merges[name] = append(v.merges[name], m)
		}
	}
	return v, nil
}

// outside is an error naming a module of a component that is not one of
// components (text_encoder_2 for an SD 1.x pipeline), nil when there is
// none.
func (l *loraSet) outside(components ...string) error {
	if l == nil {
		return nil
	}
	for _, c := range slices.Sorted(maps.Keys(l.mods)) {
		if !slices.Contains(components, c) {
			m := l.mods[c][0]
			return &errs.Error{Pkg: string(pkg), Op: "Open", Kind: errs.ErrFormat, Path: m.file.Path(),
				Detail: fmt.Sprintf("LoRA module %q adapts the %s, which this pipeline does not have", m.key, c)}
		}
	}
	return nil
}

// close closes the LoRA files.
func (l *loraSet) close() {
	if l == nil {
		return
	}
	for _, f := range l.files {
		f.Close()
	}
	l.files = nil
}

// moduleTable finds a LoRA's modules among a component's weights: a
// dotted path (diffusers, PEFT) as it is, a kohya name through the
// weights' module paths with '_' for '.'; both through the component's
// moduleAliases too.
type moduleTable struct {
	component string
	modules   map[string]bool   // module paths with a .weight
	flat      map[string]string // underscored path → module path; "" where two paths flatten alike
	aliases   map[string]string // another layout's module path → module path
}

func newModuleTable(component string, names []string) *moduleTable {
	t := &moduleTable{component: component, modules: map[string]bool{}, flat: map[string]string{}, aliases: map[string]string{}}
	for _, n := range names {
		if m, ok := strings.CutSuffix(n, ".weight"); ok {
			t.modules[m] = true
			t.addFlat(m, m)
		}
	}
	if f := moduleAliases[component]; f != nil {
		for from, to := range f(names) {
			if t.modules[to] {
				t.aliases[from] = to
				t.addFlat(from, to)
			}
		}
	}
	return t
}

// addFlat files module under name's underscored form.
func (t *moduleTable) addFlat(name, module string) {
	k := strings.ReplaceAll(name, ".", "_")
	if prev, ok := t.flat[k]; ok && prev != module {
		module = ""
	}
	t.flat[k] = module
}

// resolve is the module path of the component that m adapts.
func (t *moduleTable) resolve(m *loraModule) (string, error) {
	if !m.kohya {
		for _, c := range dottedCandidates(m.module) {
			if t.modules[c] {
				return c, nil
			}
			if to, ok := t.aliases[c]; ok {
				return to, nil
			}
		}
	} else if to, ok := t.flat[m.module]; ok {
		if to == "" {
			return "", pkg.Errorf("Open", errs.ErrFormat, "LoRA module %q matches more than one module of the %s", m.key, t.component)
		}
		return to, nil
	}
	return "", pkg.Errorf("Open", errs.ErrFormat, "LoRA module %q matches no weight of the %s", m.key, t.component)
}

// processorNames are the projections of diffusers' old attention
// processors (attn1.processor.to_q_lora) as the UNet's attentions and the
// text encoders' name them.
var processorNames = map[string][]string{
	"to_q":   {"to_q", "q_proj"},
	"to_k":   {"to_k", "k_proj"},
	"to_v":   {"to_v", "v_proj"},
	"to_out": {"to_out.0", "out_proj"},
}

// dottedCandidates are the module paths a diffusers LoRA's module may
// name: itself, and an attention processor's projection as the models
// name it.
func dottedCandidates(module string) []string {
	out := []string{module}
	parent, last, ok := cutLast(strings.Replace(module, ".processor.", ".", 1))
	if !ok {
		return out
	}
	for _, n := range processorNames[last] {
		out = append(out, parent+"."+n)
	}
	return out
}

// cutLast splits a dotted path before its last element.
func cutLast(path string) (parent, last string, ok bool) {
	i := strings.LastIndexByte(path, '.')
	if i < 0 {
		return "", "", false
	}
	return path[:i], path[i+1:], true
}

// loraView is a component's weights with LoRAs merged into those they
// adapt. LoRAs adapt dense weights only (view), so LoadQ is the
// component's own.
type loraView struct {
	candle.Weights
	merges map[string][]*loraModule // weight name → its LoRAs, in order
}

// Load is the weight with its LoRAs merged, in its own dtype.
func (v *loraView) Load(name string, dev candle.Device) (*candle.Tensor, error) {
	mods := v.merges[name]
	w, err := v.Weights.Load(name, dev)
	if err != nil || len(mods) == 0 {
		return w, err
	}
	defer w.Close()
	p := models.NewPass()
	defer p.Close()
	shape := w.Shape()
	acc := p.T(p.In(w).ToDType(candle.F32))
	for _, m := range mods {
		f32 := func(name string, rows int) *candle.Tensor {
			x := p.Own(m.file.Load(name, dev))
			return p.T(p.T(x.ToDType(candle.F32)).Reshape(rows, -1))
		}
		up, down := f32(m.up, m.upShape[0]), f32(m.down, m.downShape[0])
		d := p.T(p.T(up.Matmul(down)).Reshape(shape...))
		acc = p.T(acc.Add(p.T(d.Affine(m.factor, 0))))
	}
	out := p.T(acc.ToDType(w.DType()))
	if p.Err != nil {
		return nil, pkg.Wrapf("Open", p.Err, "merging LoRAs into %s", name)
	}
	return p.Keep(out), nil
}
