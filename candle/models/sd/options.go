package sd

// Options says how OpenWith loads a pipeline. The zero value is Open's.
type Options struct {
	// Tokenizer is where a single-file checkpoint's tokenizers are, as it
	// holds none: a folder with tokenizer/ (and for XL tokenizer_2/), such
	// as the diffusers folder of the same model, or a folder of CLIP's
	// vocab.json and merges.txt that every text encoder then uses (SDXL's
	// second tokenizer pads with "!", so a shared one pads it as its own
	// tokenizer_config.json says). Empty: the folder that holds the file.
	// A diffusers folder's own tokenizers are used whatever it says.
	Tokenizer string
	// Prediction is what the UNet predicts: scheduler.Epsilon or
	// scheduler.VPrediction. Empty: the folder's scheduler config says, and
	// for a single file (whose weights cannot say) SD 2.x predicts v, as
	// its 768-pixel models do, and SD 1.x and XL predict the noise.
	Prediction string
	// LoRAs are merged into the text encoders' and the UNet's weights as
	// they load, in order (see LoRA).
	LoRAs []LoRA
	// Graphs captures the UNet's forward pass as a graph on a HIP device
	// at a Generate's (or a GenerateBatch's, for the whole batch) first
	// step (unet.Captured) and replays it at the others, freeing it before
	// the VAE decodes. While a Generate captures, nothing else may use the
	// device: the pipeline then runs its Generates and GenerateBatches one
	// at a time, and a program that shares the device with other work
	// waits likewise. Off by default: SD 1.5's UNet loop at batch 1 on an
	// H200 ran at 65.6 it/s with it against 62.2 without, a small gain, as
	// the UNet's kernels, not the host's launches, take most of a step.
	Graphs bool
}
