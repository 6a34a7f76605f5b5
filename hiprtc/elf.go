package hiprtc

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// KernelSymbols lists the kernels in a code object: an AMDGPU code object
// (each kernel has a "<name>.kd" descriptor), a CUBIN (global functions) or
// PTX text (.entry directives). Names are symbol names, sorted.
func KernelSymbols(image []byte) ([]string, error) {
	if bytes.HasPrefix(image, []byte(elf.ELFMAG)) {
		return elfKernels(image)
	}
	if bytes.Contains(image, []byte(".version")) && bytes.Contains(image, []byte(".target")) {
		return ptxKernels(image), nil
	}
	return nil, fmt.Errorf("hiprtc: KernelSymbols: %d bytes are neither an ELF code object nor PTX", len(image))
}

func elfKernels(image []byte) ([]string, error) {
	// A CUBIN keeps NVIDIA's ABI version where ELF keeps its own (the
	// identification byte EI_VERSION and e_version), which debug/elf
	// refuses: read a copy with both set to EV_CURRENT.
	if len(image) >= 24 {
		order := binary.ByteOrder(binary.LittleEndian)
		if elf.Data(image[elf.EI_DATA]) == elf.ELFDATA2MSB {
			order = binary.BigEndian
		}
		if image[elf.EI_VERSION] != byte(elf.EV_CURRENT) || order.Uint32(image[20:]) != uint32(elf.EV_CURRENT) {
			image = bytes.Clone(image)
			image[elf.EI_VERSION] = byte(elf.EV_CURRENT)
			order.PutUint32(image[20:], uint32(elf.EV_CURRENT))
		}
	}
	f, err := elf.NewFile(bytes.NewReader(image))
	if err != nil {
		return nil, fmt.Errorf("hiprtc: KernelSymbols: %w", err)
	}
	if f.Machine != elf.EM_AMDGPU && f.Machine != elf.EM_CUDA {
		return nil, fmt.Errorf("hiprtc: KernelSymbols: an ELF for %s, not a GPU", f.Machine)
	}
	syms, err := f.Symbols()
	if err != nil {
		return nil, fmt.Errorf("hiprtc: KernelSymbols: %w", err)
	}
	var out []string
	switch f.Machine {
	case elf.EM_AMDGPU:
		for _, s := range syms {
			if name, ok := strings.CutSuffix(s.Name, ".kd"); ok && elf.ST_TYPE(s.Info) == elf.STT_OBJECT {
				out = append(out, name)
			}
		}
	case elf.EM_CUDA:
		// Kernels are the functions marked as entries (STO_CUDA_ENTRY in
		// st_other); the others are device functions and CUDA's helpers.
		const stoCUDAEntry = 0x10
		for _, s := range syms {
			if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Other&stoCUDAEntry != 0 && s.Section != elf.SHN_UNDEF {
				out = append(out, s.Name)
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

var ptxEntry = regexp.MustCompile(`\.entry\s+([A-Za-z_$][A-Za-z0-9_$]*)`)

func ptxKernels(ptx []byte) []string {
	var out []string
	for _, m := range ptxEntry.FindAllSubmatch(ptx, -1) {
		out = append(out, string(m[1]))
	}
	sort.Strings(out)
	return out
}
