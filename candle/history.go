package candle

import (
	"math/bits"
	"unsafe"

	"github.com/rocm-go/rocm/hip"
)

// TokenHistory is the set of tokens each of several sequences has seen,
// kept on a device, for the repetition penalty of Tensor.Sample: a bitmap
// of the vocabulary per slot. A row of Sample that names a slot
// (SampleOptions.History) is penalised for the slot's tokens, and the
// token it draws joins the slot on the device, in the same call. A
// generation loop thus sets a slot once, with the prompt, and uploads
// nothing per step for the penalty, however long the completion grows
// (a list of previous tokens, SampleOptions.Previous, is uploaded by
// every call).
//
// A slot holds each token at most once, which is what the penalty needs:
// a token is penalised once however often it came.
type TokenHistory struct {
	st           *Storage // U32: slots rows of words
	slots, vocab int
}

// NewTokenHistory makes a history of slots empty slots for a vocabulary
// of vocab tokens on dev.
func NewTokenHistory(dev Device, slots, vocab int) (*TokenHistory, error) {
	const op = "NewTokenHistory"
	if dev == nil {
		return nil, pkg.Errorf(op, ErrDevice, "nil device")
	}
	if slots < 1 || vocab < 1 || vocab > sampleMaxCols {
		return nil, pkg.Errorf(op, ErrArgument, "%d slots of a vocabulary of %d: want ≥ 1 slot and a vocabulary of 1 to %d", slots, vocab, sampleMaxCols)
	}
	words := historyWords(vocab)
	st, err := newStorage(op, dev, U32, slots*words)
	if err != nil {
		return nil, err
	}
	all := ContiguousLayout(Shape{slots * words})
	if err := dev.backend().fill(view{st, all}, scalar{}); err != nil {
		st.release()
		return nil, pkg.Wrap(op, err)
	}
	st.owned.Store(true)
	return &TokenHistory{st: st, slots: slots, vocab: vocab}, nil
}

// historyWords is the 32-bit words of a slot's bitmap.
func historyWords(vocab int) int { return (vocab + 31) / 32 }

// Device is where the history is.
func (h *TokenHistory) Device() Device { return h.st.dev }

// Slots is the number of slots.
func (h *TokenHistory) Slots() int { return h.slots }

// Vocab is the vocabulary size: the logits' columns it serves.
func (h *TokenHistory) Vocab() int { return h.vocab }

// check checks that the history is open and that slot is one of it.
func (h *TokenHistory) check(op string, slot int) error {
	if h == nil {
		return pkg.Errorf(op, ErrArgument, "nil token history")
	}
	if err := h.st.alive(op); err != nil {
		return &Error{Pkg: string(pkg), Op: op, Kind: ErrClosed, Detail: "use of a closed token history", Err: ErrClosed}
	}
	if slot < 0 || slot >= h.slots {
		return pkg.Errorf(op, ErrIndex, "slot %d: want 0 to %d (the history's slots)", slot, h.slots-1)
	}
	return nil
}

// Set makes tokens the whole content of a slot (a repeated token counts
// once; none empties it), in one copy of the slot's bitmap to the device,
// ordered after the work already queued.
func (h *TokenHistory) Set(slot int, tokens []int32) error {
	const op = "TokenHistory.Set"
	if err := h.check(op, slot); err != nil {
		return err
	}
	words := historyWords(h.vocab)
	bm := make([]uint32, words)
	for _, t := range tokens {
		if t < 0 || int(t) >= h.vocab {
			return pkg.Errorf(op, ErrIndex, "token %d: want 0 to %d (the vocabulary)", t, h.vocab-1)
		}
		bm[t>>5] |= 1 << (t & 31)
	}
	src, err := storageOf(op, h.st.dev, U32, words, hip.AsBytes(bm))
	if err != nil {
		return err
	}
	defer src.release()
	to := Layout{Shape: Shape{words}, Stride: []int{1}, Offset: slot * words}
	return pkg.Wrap(op, h.st.dev.backend().copy(view{src, ContiguousLayout(Shape{words})}, view{h.st, to}))
}

// Tokens returns a slot's tokens in ascending order; on a GPU it waits for
// the work queued before, the draws that add to the slot included.
func (h *TokenHistory) Tokens(slot int) ([]int32, error) {
	const op = "TokenHistory.Tokens"
	if err := h.check(op, slot); err != nil {
		return nil, err
	}
	words := historyWords(h.vocab)
	bm := make([]uint32, words)
	if err := h.st.dev.backend().read(h.st, slot*words, words, hip.AsBytes(bm)); err != nil {
		return nil, pkg.Wrap(op, err)
	}
	var out []int32
	for w, v := range bm {
		for ; v != 0; v &= v - 1 {
			out = append(out, int32(w*32+bits.TrailingZeros32(v)))
		}
	}
	return out, nil
}

// Close gives the history's memory back to its device, after the work
// queued that uses it. Closing twice does nothing.
func (h *TokenHistory) Close() error {
	if h != nil {
		h.st.Close()
	}
	return nil
}

// sampleHist is a row's history for a backend's sample: the storage of a
// TokenHistory and the first word of the row's slot; st is nil for none.
type sampleHist struct {
	st   *Storage
	word int
}

// cpuWords is the slot's bitmap in a CPU storage.
func (s sampleHist) cpuWords(n int) []uint32 {
	b := s.st.bytesAt(s.word, n)
	return unsafe.Slice((*uint32)(unsafe.Pointer(&b[0])), n)
}
